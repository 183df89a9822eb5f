import Daemon

Daemon.main()
