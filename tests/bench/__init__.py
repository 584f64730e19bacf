"""Tests of bench/: its harness and each benchmark script (smoke modes, never timed)."""
