"""The `atari` family: ALE games by name (`env=atari/pong`)."""
