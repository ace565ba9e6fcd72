"""``python -m engram``: the same as the ``engram`` command."""

from engram.cli.main import main

if __name__ == "__main__":
    main()
