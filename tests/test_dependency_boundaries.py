"""The gateway, refiner and generator images carry no torch: importing their apps must not need it."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("service", ["gateway", "refiner", "generator"])
def test_light_services_do_not_import_torch(service: str) -> None:
    code = (
        "import sys\n"
        f"import rag_{service}.app as app\n"
        "app.create_app()\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"rag_{service} imported {result.stdout.strip()}"
