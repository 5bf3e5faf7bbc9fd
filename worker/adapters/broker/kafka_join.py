"""One JoinGroup per join, offering every assignor at once.

aiokafka 0.14's `CoordinatorGroupRebalance.perform_group_join` sends its JoinGroup inside
its loop over the assignors: a member that offers two (ours: sticky, then round robin)
joins twice per rebalance, the first time with sticky alone. The second join changes the
member's protocols after the group has formed, so the broker starts another generation,
and that fails the other members' SyncGroup. Two members doing it in turn can keep a
group rebalancing for a minute.

`OneJoinRebalance` builds the whole protocol list, sends one JoinGroup (again with the
member id the broker hands a new member), and handles the answer as aiokafka does. aiokafka's
coordinator builds one of these per rejoin, by its module-level name, so `install` puts
ours in that name's place.

As the group's leader it also assigns only once its metadata knows every subscribed
topic's partitions. A broker just back from a freeze can answer a metadata request with
no brokers; aiokafka then keeps what it had (nothing, for a new client) until its next
periodic refresh, minutes later, and a leader assigning meanwhile gave every member
nothing until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import aiokafka.errors as Errors
from aiokafka.consumer import group_coordinator
from aiokafka.coordinator.protocol import ConsumerProtocol
from aiokafka.protocol.group import JoinGroupRequest

log = logging.getLogger("derender.worker")

_RETRY_AFTER_BACKOFF = (Errors.GroupLoadInProgressError,)
_COORDINATOR_MOVED = (Errors.GroupCoordinatorNotAvailableError, Errors.NotCoordinatorForGroupError)
# How long a leader refreshes missing partition metadata before it rejoins instead.
METADATA_WAIT_S = 5.0
METADATA_RETRY_S = 0.2
_FATAL = (
    Errors.InconsistentGroupProtocolError,
    Errors.InvalidSessionTimeoutError,
    Errors.InvalidGroupIdError,
)


class OneJoinRebalance(group_coordinator.CoordinatorGroupRebalance):  # type: ignore[misc]
    async def perform_group_join(self) -> tuple[str, bytes] | None:
        """(protocol, this member's assignment) for the new generation; None to try again
        (aiokafka's coordinator backs off and rejoins)."""
        log.debug("(re)joining group %s", self.group_id)
        response = await self._join(self._protocols())
        if response is None:
            return None
        error = Errors.for_code(response.error_code)
        coordinator = self._coordinator
        if error is Errors.NoError:
            coordinator.member_id = response.member_id
            coordinator.generation = response.generation_id
            if response.leader_id == response.member_id:
                if not await self._partitions_known():
                    return None
                assignment = await self._on_join_leader(response)
            else:
                assignment = await self._on_join_follower()
            return None if assignment is None else (response.group_protocol, assignment)
        if error in _RETRY_AFTER_BACKOFF:
            await asyncio.sleep(self._retry_backoff_ms / 1000)
        elif error is Errors.UnknownMemberIdError:
            coordinator.reset_generation()
        elif error in _COORDINATOR_MOVED:
            coordinator.coordinator_dead()
        elif error in _FATAL:
            raise error()
        elif error is Errors.GroupAuthorizationFailedError:
            raise error(self.group_id)
        else:
            raise Errors.KafkaError(repr(error()))
        log.debug("join of group %s answered %s", self.group_id, error.__name__)
        return None

    async def _partitions_known(self) -> bool:
        """True once the metadata has partitions for every subscribed topic, refreshing it
        (within METADATA_WAIT_S) while some are missing; False: rejoin after a backoff."""
        # aiokafka has no public way to refresh a consumer's metadata now.
        client = self._coordinator._client
        loop = asyncio.get_running_loop()
        deadline = loop.time() + METADATA_WAIT_S
        while True:
            missing = sorted(
                t for t in self._subscription.topics if not client.cluster.partitions_for_topic(t)
            )
            if not missing:
                return True
            left = deadline - loop.time()
            if left <= 0:
                log.warning(
                    "no partition metadata for %s after %.0f s: rejoining the group",
                    ", ".join(missing),
                    METADATA_WAIT_S,
                )
                return False
            with contextlib.suppress(TimeoutError, Errors.KafkaError):
                await asyncio.wait_for(client.force_metadata_update(), left)
            if any(not client.cluster.partitions_for_topic(t) for t in missing):
                await asyncio.sleep(min(METADATA_RETRY_S, max(0.0, deadline - loop.time())))

    def _protocols(self) -> list[tuple[str, bytes]]:
        topics = self._subscription.topics
        protocols = []
        for assignor in self._assignors:
            metadata = assignor.metadata(topics)
            protocols.append(
                (assignor.name, metadata if isinstance(metadata, bytes) else metadata.encode())
            )
        return protocols

    async def _join(self, protocols: list[tuple[str, bytes]]) -> Any:
        """The broker's JoinGroup answer, or None when the request failed (aiokafka's
        coordinator lookup then backs off) or the subscription changed meanwhile. A new
        member's first request is answered only with the id to join with."""
        coordinator = self._coordinator
        while True:
            request = JoinGroupRequest(
                self.group_id,
                self._session_timeout_ms,
                self._rebalance_timeout_ms,
                coordinator.member_id,
                coordinator._group_instance_id,
                ConsumerProtocol.PROTOCOL_TYPE,
                protocols,
            )
            try:
                response = await coordinator._send_req(request)
            except Errors.KafkaError:
                return None
            if not self._subscription.active:
                return None
            if Errors.for_code(response.error_code) is not Errors.MemberIdRequired:
                return response
            coordinator.member_id = response.member_id


def install() -> None:
    """Every aiokafka consumer of this process then joins with one request (idempotent)."""
    group_coordinator.CoordinatorGroupRebalance = OneJoinRebalance
