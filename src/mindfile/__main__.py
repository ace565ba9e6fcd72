"""``python -m mindfile``: the same as the ``mindfile`` command."""

from mindfile.cli.main import main

if __name__ == "__main__":
    main()
