"""An AttemptRecorder for tests: no log file, every event kept in memory."""

from tbscale.logs import AttemptRecorder


class CapturingRecorder(AttemptRecorder):
    """An AttemptRecorder with no log file that keeps its events in memory."""

    def __init__(self):
        super().__init__(None, attempt=0, label="test")
        self.events: list[tuple[str, dict]] = []

    def event(self, type, **fields):
        self.events.append((type, fields))
        super().event(type, **fields)

    def of(self, kind: str) -> list[dict]:
        """The fields of every event of one type, in order."""
        return [f for t, f in self.events if t == kind]
