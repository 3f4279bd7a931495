"""The server's core: channels, positions, subscriptions and the hub. No HTTP here."""
