"""``python -m ssdtwin``: the ``ssdtwin`` command."""

from .commands.entry import main

if __name__ == "__main__":
    main()
