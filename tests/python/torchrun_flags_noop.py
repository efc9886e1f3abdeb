"""A program that does nothing: tests/python/torchrun_flags.py runs it with --run-path."""
