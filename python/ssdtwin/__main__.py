"""``python -m ssdtwin``: the ``ssdtwin`` command."""

from .commands.cli import main

if __name__ == "__main__":
    main()
