"""Unit tests of pushserver/wire/."""
