"""A user-defined resource type travels over ADS like the built-in ones."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from google.protobuf import any_pb2, struct_pb2

from tests.client.conftest import next_event
from xdsclient import ResourceChanged, ResourceDecodeError, ResourceType, XdsClient
from xdsclient.testing import ControlPlane

STRUCT_URL = "type.googleapis.com/google.protobuf.Struct"


def decode_settings(data: bytes) -> tuple[str, dict[str, Any]]:
    message = struct_pb2.Struct.FromString(data)
    if "name" not in message.fields:
        raise ResourceDecodeError("name: required")
    return message.fields["name"].string_value, {
        k: v.string_value for k, v in message.fields.items()
    }


SETTINGS = ResourceType(type_url=STRUCT_URL, decode=decode_settings)


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
async def test_a_custom_type_is_watched_over_ads(control_plane: ControlPlane, delta: bool) -> None:
    # Custom types have no per-type service: the client refuses them there (test_options).
    settings = struct_pb2.Struct()
    settings.update({"name": "feature-flags", "color": "blue"})
    packed = any_pb2.Any()
    packed.Pack(settings)
    control_plane.set_packed(packed, name="feature-flags")
    async with XdsClient(
        control_plane.address, node_id="n", resource_types=[SETTINGS], delta=delta
    ) as client:
        async with client.watch(SETTINGS, "feature-flags") as watch:
            event = await next_event(watch)
        assert isinstance(event, ResourceChanged)
        assert event.value == {"name": "feature-flags", "color": "blue"}


async def test_resources_are_decoded_with_the_cyclic_collector_paused_and_it_resumes_after(
    control_plane: ControlPlane,
) -> None:
    collecting: list[bool] = []

    def decode(data: bytes) -> tuple[str, dict[str, Any]]:
        collecting.append(gc.isenabled())
        return decode_settings(data)

    recording = ResourceType(type_url=STRUCT_URL, decode=decode)
    settings = struct_pb2.Struct()
    settings.update({"name": "feature-flags"})
    packed = any_pb2.Any()
    packed.Pack(settings)
    control_plane.set_packed(packed, name="feature-flags")
    assert gc.isenabled()
    async with (
        XdsClient(control_plane.address, node_id="n", resource_types=[recording]) as client,
        client.watch(recording, "feature-flags") as watch,
    ):
        assert isinstance(await next_event(watch), ResourceChanged)
    assert gc.isenabled()  # on again once the stream ended (or HOLD_LIMIT after the response)
    assert collecting == [False]


def test_pausing_the_collector_leaves_it_off_when_the_application_turned_it_off() -> None:
    from xdsclient._runtime._gc import gc_paused

    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a decoder bug")
    assert gc.isenabled()


def test_holding_the_collector_resumes_it_only_as_found_and_not_before_its_deadline() -> None:
    """A `CollectorHold` resumes the collector at its release, or at a check past its
    deadline, and leaves it off when the application had turned it off."""
    from xdsclient._runtime._gc import HOLD_LIMIT, CollectorHold

    hold = CollectorHold()
    hold.hold(10.0)
    hold.hold(11.0)  # holding already: the first deadline stays
    assert not gc.isenabled()
    deadline = hold.deadline
    assert deadline == 10.0 + HOLD_LIMIT
    hold.release(10.0 + HOLD_LIMIT / 2)
    assert not gc.isenabled()
    hold.release(10.0 + HOLD_LIMIT)
    assert gc.isenabled()
    assert hold.deadline is None
    gc.disable()
    try:
        hold.hold(0.0)
        hold.release()
        assert not gc.isenabled()
    finally:
        gc.enable()
