"""Unit tests of pushserver/broker/."""
