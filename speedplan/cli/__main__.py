from speedplan.cli.app import main

main()
