"""Reading the JSON the example scripts write, as strictly as the format: NaN and infinities are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def strict_json(path: Path) -> Any:
    """``path``'s JSON, refusing NaN and infinities (which Python's json would read)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{path.name} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)
