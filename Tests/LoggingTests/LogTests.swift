import Logging
import Foundation
import Glibc
import Testing

@Suite("log buffer")
struct LogTests {
    @Test("stdout that blocks: lines past the bound are dropped and counted, and said once output resumes")
    func boundedWhileBlocked() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let bound = 256 << 10
        let logger = Logger(level: .info, output: fds[1], maxBufferedBytes: bound)
        // Nobody reads the pipe: the writer blocks once the pipe (64 KiB) is full.
        let padding = String(repeating: "x", count: 100)
        var peak = 0
        for i in 0..<100_000 {
            logger.log(.info, "rpc", [("n", .int(i)), ("padding", .string(padding))])
            if i % 1000 == 0 { peak = max(peak, logger.bufferedBytes) }
        }
        print("log buffer: peak \(peak) bytes of \(bound) allowed; \(logger.droppedLines) lines dropped of 100000")
        #expect(peak <= bound)
        #expect(logger.droppedLines > 50_000)
        // Output resumes: read until every dropped line is reported (drops may span several reports).
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        func reported() -> Int {
            String(decoding: text, as: UTF8.self).split(separator: "\n").filter { $0.contains(#""msg":"log lines dropped""#) }
                .compactMap { line in line.split(separator: #""count":"#).last.flatMap { Int($0.prefix { $0.isNumber }) } }
                .reduce(0, +)
        }
        let end = Date().addingTimeInterval(10)
        while Date() < end && reported() < logger.droppedLines {
            let n = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if n > 0 {
                text.append(contentsOf: buffer[0..<n])
            } else {
                usleep(5_000)
            }
        }
        #expect(reported() == logger.droppedLines)
    }
}
