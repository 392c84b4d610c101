"""parallel-scheduler as the burst benchmark drives it (client, workers, scheduling, clean-up),
but with the product's ``SchedulerService`` as its scheduler process (``service_process``), as
``celery parallel-scheduler`` runs it: the steady-lateness scenario's system."""

from __future__ import annotations

from benchmarks.harness.service_process import ServiceConfig, ServiceLog, ServiceProcess
from benchmarks.harness.systems import BurstConfig, ParallelScheduler, RunContext

__all__ = ["ServiceScheduler"]


class ServiceScheduler(ParallelScheduler):
    """``ParallelScheduler`` of the burst benchmark (client, worker, scheduling, clean-up), whose
    scheduler process is the product's ``SchedulerService`` (``service_process``)."""

    def __init__(self, cfg: BurstConfig, fast_publish: bool) -> None:
        super().__init__(cfg)
        self.fast_publish = fast_publish
        self.service: ServiceProcess | None = None
        self.log: ServiceLog | None = None

    def _start_scheduler(self, ctx: RunContext) -> None:
        settings = self._settings(ctx)
        settings.pop("storage_url")
        settings.pop("prefix")
        settings["fast_publish"] = self.fast_publish
        config = ServiceConfig(
            self.cfg.storage_url, ctx.prefix, self.cfg.broker_url, ctx.queue, settings
        )
        self.service = ServiceProcess(config, ctx.folder)
        self.service.start()

    def released_count(self) -> int:
        return 0 if self.service is None else self.service.released

    def scheduler_pids(self) -> list[int]:
        return [] if self.service is None else [self.service.pid]

    def stop(self) -> None:
        if self.service is not None and self.log is None:
            self.log = self.service.stop()
        super().stop()  # the workers

    def sent_times(self) -> list[tuple[str, float]] | None:
        return None if self.log is None else self.log.sent
