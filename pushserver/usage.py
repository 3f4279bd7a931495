"""Command-line mistakes answered in one line with exit status 2.

argparse prints the whole usage block before its error; with thirty-odd settings that buries the
one line the user has to act on, so the error line stands alone (`--help` shows the rest).
"""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")
