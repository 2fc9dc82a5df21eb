"""The one error type for a bad config: names the key, the value and what is allowed."""


class ConfigError(ValueError):
    def __init__(self, key: str, value, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key}={value!r} is not allowed: {allowed}")
