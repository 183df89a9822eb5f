// swift-tools-version: 6.2
import PackageDescription

/// Settings every Swift target shares (see ../shared/STYLE.md, "Package settings").
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The per-call transport path (HTTP2, RPC): release builds leave out the run-time exclusivity checks
/// (`swift_beginAccess` on every class-field access, ~3% of a Health/Check's CPU); debug builds, and so
/// the tests, keep them.
let hotPath: [SwiftSetting] = strict + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

/// For the modules that must stay memory-safe (no pointers, no C): the compiler flags any `unsafe` use.
let safe: [SwiftSetting] = strict + [.strictMemorySafety()]

let package = Package(
    name: "billingd",
    products: [
        .executable(name: "billingd", targets: ["billingd"]),
        .executable(name: "billingctl", targets: ["billingctl"]),
    ],
    targets: [
        // C libraries from Debian, one system-library target each.
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSystem"),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // Pure Swift layers.
        .target(name: "Lifecycle", exclude: ["README.md"], swiftSettings: strict),
        .target(name: "ProtoWire", exclude: ["README.md"], swiftSettings: strict),
        .target(name: "Logging", dependencies: ["Lifecycle", "ProtoWire"], exclude: ["README.md"], swiftSettings: strict),
        .target(name: "Metrics", exclude: ["README.md"], swiftSettings: safe),
        .target(name: "RPC", dependencies: ["Lifecycle", "ProtoWire"], exclude: ["README.md"], swiftSettings: hotPath),
        .target(name: "BillingAPI", dependencies: ["ProtoWire"], swiftSettings: safe),
        .target(name: "ProtoJSON", dependencies: ["ProtoWire"], exclude: ["README.md"], swiftSettings: safe),
        .target(name: "Billing", exclude: ["README.md"], swiftSettings: safe),
        .target(name: "JOSE", dependencies: ["ProtoWire"], exclude: ["README.md"], swiftSettings: strict),
        .target(name: "AppStore", dependencies: ["Crypto", "JOSE", "ProtoWire"], exclude: ["README.md"], swiftSettings: strict),
        .target(name: "AppStoreAPI", dependencies: ["AppStore", "Crypto", "JOSE", "ProtoWire"], exclude: ["README.md"], swiftSettings: strict),
        .target(name: "GooglePlayAPI", dependencies: ["Crypto", "JOSE", "ProtoWire"], exclude: ["README.md"], swiftSettings: strict),
        .target(
            name: "AfterSale", dependencies: ["Lifecycle", "Billing", "AppStore", "AppStoreAPI", "GooglePlayAPI", "JOSE"], exclude: ["README.md"],
            swiftSettings: strict),
        .target(
            name: "BillingService",
            dependencies: [
                "AfterSale", "Lifecycle", "Billing", "BillingAPI", "RPC", "ProtoWire", "AppStore", "AppStoreAPI", "GooglePlayAPI", "Crypto", "JOSE",
            ],
            exclude: ["README.md"],
            swiftSettings: strict),

        // Wrappers around C.
        .target(name: "Crypto", dependencies: ["COpenSSL"], exclude: ["README.md"], swiftSettings: strict),
        .target(name: "IO", dependencies: ["Lifecycle", "COpenSSL", "CSystem"], exclude: ["README.md"], swiftSettings: hotPath),
        .target(
            name: "HTTP2", dependencies: ["Lifecycle", "IO", "CNGHTTP2", "CMicroHTTPD", "CSystem", "RPC", "ProtoWire"], exclude: ["README.md"],
            swiftSettings: hotPath),
        .target(name: "HTTPClient", dependencies: ["Lifecycle", "IO", "CCurl", "CSystem"], exclude: ["README.md"], swiftSettings: strict),
        .target(
            name: "AppStoreHTTP", dependencies: ["Lifecycle", "AppStoreAPI", "AppStore", "HTTPClient", "JOSE"], exclude: ["README.md"], swiftSettings: strict),
        .target(
            name: "GooglePlayHTTP", dependencies: ["Lifecycle", "GooglePlayAPI", "HTTPClient", "IO", "Crypto", "ProtoWire"], exclude: ["README.md"],
            swiftSettings: strict),
        .target(name: "Gzip", dependencies: ["CZlib"], exclude: ["README.md"], swiftSettings: strict),
        .target(name: "Connect", dependencies: ["Lifecycle", "Gzip", "HTTP2", "RPC", "ProtoJSON", "ProtoWire"], exclude: ["README.md"], swiftSettings: strict),
        .target(
            name: "Webhooks", dependencies: ["Lifecycle", "Billing", "BillingAPI", "BillingService", "ProtoJSON", "ProtoWire", "HTTPClient", "Crypto", "RPC"],
            exclude: ["README.md"],
            swiftSettings: strict),
        .target(name: "HTTPFront", dependencies: ["Lifecycle", "HTTP2", "IO", "RPC"], exclude: ["README.md"], swiftSettings: strict),
        .target(name: "Storage", dependencies: ["Lifecycle", "CSQLite", "CLibPQ", "Billing", "Crypto"], exclude: ["README.md"], swiftSettings: strict),

        .target(
            name: "Endpoints",
            dependencies: [
                "AfterSale", "Billing", "BillingService", "GooglePlayAPI", "HTTP2", "HTTPClient", "HTTPFront", "Lifecycle", "Logging", "Metrics", "ProtoWire",
                "RPC",
            ],
            exclude: ["README.md"], swiftSettings: strict),
        .target(
            name: "Daemon",
            dependencies: [
                "AfterSale", "Connect", "Endpoints", "HTTP2", "HTTPFront", "IO", "Lifecycle", "Logging", "ProtoJSON", "RPC", "ProtoWire", "Billing",
                "BillingService",
                "Storage", "AppStore",
                "AppStoreAPI",
                "AppStoreHTTP", "Crypto",
                "Metrics", "HTTPClient", "Webhooks", "GooglePlayAPI", "GooglePlayHTTP",
            ],
            exclude: ["README.md"], swiftSettings: strict),

        // Executables.
        .executableTarget(
            name: "billingd",
            dependencies: ["Daemon"],
            swiftSettings: strict),
        .executableTarget(
            name: "billingctl",
            dependencies: [
                "HTTP2", "Lifecycle", "RPC", "BillingAPI", "ProtoWire", "AppStore", "AppStoreAPI", "AppStoreHTTP", "Crypto", "ProtoJSON", "HTTPClient",
                "GooglePlayAPI",
                "GooglePlayHTTP",
            ],
            swiftSettings: strict),

        .target(name: "TestSupport", dependencies: ["Lifecycle"], path: "Tests/TestSupport", swiftSettings: strict),
        // The test kit: the in-memory transport and manual clock, a client of one port's call pipeline over every protocol.
        .target(
            name: "BillingTesting", dependencies: ["Billing", "Connect", "Daemon", "Logging", "HTTP2", "IO", "Lifecycle", "ProtoJSON", "RPC"],
            path: "Tests/BillingTesting",
            swiftSettings: strict),
        .testTarget(
            name: "ConnectTests", dependencies: ["BillingTesting", "Connect", "HTTP2", "ProtoWire", "RPC"], swiftSettings: strict),
        .testTarget(
            name: "ProtoWireTests", dependencies: ["TestSupport", "ProtoWire", "BillingAPI", "RPC"], exclude: ["golden.json"],
            swiftSettings: strict),
        .testTarget(name: "JOSETests", dependencies: ["JOSE", "ProtoWire"], swiftSettings: strict),
        .testTarget(name: "LifecycleTests", dependencies: ["Lifecycle"], swiftSettings: strict),
        .testTarget(name: "MetricsTests", dependencies: ["Metrics"], swiftSettings: strict),
        .testTarget(name: "LoggingTests", dependencies: ["Logging"], swiftSettings: strict),
        .testTarget(
            name: "DaemonTests", dependencies: ["BillingAPI", "BillingTesting", "Daemon", "HTTP2", "IO", "Logging", "ProtoWire", "RPC"], swiftSettings: strict),
        .testTarget(name: "RPCTests", dependencies: ["Lifecycle", "RPC", "ProtoWire"], swiftSettings: strict),
        .testTarget(name: "ProtoJSONTests", dependencies: ["TestSupport", "ProtoJSON", "ProtoWire"], swiftSettings: strict),
        .testTarget(name: "BillingTests", dependencies: ["Billing"], swiftSettings: strict),
        .testTarget(
            name: "BillingServiceTests",
            dependencies: [
                "BillingTesting", "Lifecycle", "TestSupport", "Billing", "BillingService", "BillingAPI", "RPC", "ProtoWire", "AppStoreAPI", "Crypto",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "AppStoreTests", dependencies: ["TestSupport", "AppStore", "Crypto", "ProtoWire"], exclude: ["corpus"], swiftSettings: strict),
        .testTarget(
            name: "AfterSaleTests",
            dependencies: [
                "BillingTesting",
                "AfterSale", "Lifecycle", "TestSupport", "Billing", "BillingService", "AppStore", "Crypto", "Storage", "AppStoreAPI", "BillingAPI", "RPC",
                "ProtoWire",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "StorageTests",
            dependencies: ["BillingTesting", "Lifecycle", "TestSupport", "Storage", "Billing", "BillingService", "BillingAPI", "RPC", "ProtoWire", "Crypto"],
            exclude: ["Upgrade"], swiftSettings: strict),
        .testTarget(name: "AppStoreAPITests", dependencies: ["Lifecycle", "AppStoreAPI", "AppStoreHTTP", "Crypto"], swiftSettings: strict),
        .testTarget(
            name: "GooglePlayTests", dependencies: ["Lifecycle", "GooglePlayAPI", "GooglePlayHTTP", "Crypto", "HTTPClient", "ProtoWire"],
            swiftSettings: strict),
        .testTarget(name: "WebhooksTests", dependencies: ["Lifecycle", "Webhooks", "Billing", "Storage", "Crypto", "ProtoJSON"], swiftSettings: strict),
        .testTarget(name: "HTTPFrontTests", dependencies: ["TestSupport", "HTTPFront", "HTTP2", "HTTPClient"], swiftSettings: strict),
        .testTarget(
            name: "HTTP2Tests",
            dependencies: [
                "BillingTesting", "Logging", "Lifecycle", "TestSupport", "Daemon", "HTTP2", "CNGHTTP2", "RPC", "Billing", "BillingService", "BillingAPI",
                "Storage",
                "ProtoWire",
            ],
            swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
