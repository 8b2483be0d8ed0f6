"""The command line: `app` mounts one module per command group (see `speedplan.cli.app`)."""
