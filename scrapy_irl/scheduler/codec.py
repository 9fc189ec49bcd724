"""Requests as bytes for DRUM aux and BEAST queues (Scrapy's own dict form, pickled).

Same rules as Scrapy's disk queues: callbacks must be spider methods (or absent);
anything else raises ValueError, and the scheduler keeps such requests in RAM instead,
counting them in ``scheduler/unserializable`` like Scrapy's scheduler.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

from scrapy import FormRequest, Request
from scrapy.http import JsonRequest, XmlRpcRequest
from scrapy.utils.request import request_from_dict

if TYPE_CHECKING:
    from scrapy import Spider


class RequestCodec:
    """Encode/decode requests of one spider."""

    def __init__(self, spider: Spider | None) -> None:
        self.spider = spider

    def encode(self, request: Request) -> bytes:
        try:
            data: dict[str, Any] = request.to_dict(spider=self.spider)
            blob = pickle.dumps(data, protocol=5)
        except (ValueError, TypeError, AttributeError, pickle.PicklingError) as exc:
            raise ValueError(f"cannot serialize {request}: {exc}") from exc
        if type(request) not in _REBUILT:
            # A subclass Scrapy's request_from_dict cannot build again (an __init__ that
            # takes another required argument, a class nested in the spider, whose path
            # does not import) encoded fine and was lost at its hand-out, even without a
            # JOBDIR (a probe, 2026-11-29). Rebuilt once here (~12 us), as its hand-out
            # would; a failure keeps it in RAM.
            try:
                request_from_dict(pickle.loads(blob), spider=self.spider)
            except Exception as exc:  # noqa: BLE001 - any failure means "keep it in RAM"
                raise ValueError(f"cannot rebuild {request} from its record: {exc!r}") from exc
        elif not (_plain(request.meta.values()) and _plain(request.cb_kwargs.values())):
            # Some objects pickle but do not unpickle (an exception class whose __init__
            # takes other arguments than it passes to Exception): written to disk, such a
            # request was lost at its hand-out (a probe, 2026-11-27). Read back once here,
            # only for requests carrying such objects (~3 us).
            try:
                pickle.loads(blob)
            except Exception as exc:  # noqa: BLE001 - any failure means "keep it in RAM"
                raise ValueError(f"cannot read {request} back: {exc!r}") from exc
        return blob

    def decode(self, blob: bytes) -> Request:
        try:
            data = pickle.loads(blob)
            return request_from_dict(data, spider=self.spider)
        except Exception as exc:
            raise ValueError(
                f"undecodable request record ({len(blob)} bytes): {exc}"
            ) from exc

    @staticmethod
    def meta_of(blob: bytes) -> dict[str, Any]:
        """A record's meta without rebuilding its request (one plain unpickle, ~2 us
        against ~14 us for :meth:`decode`): routing a new host reads its proxy choice."""
        try:
            data = pickle.loads(blob)
        except Exception as exc:
            raise ValueError(
                f"undecodable request record ({len(blob)} bytes): {exc}"
            ) from exc
        meta = data.get("meta") if isinstance(data, dict) else None
        return meta if isinstance(meta, dict) else {}


#: Request classes request_from_dict always builds again (Scrapy's own); a request of any
#: other class is rebuilt once when it is encoded.
_REBUILT = frozenset({Request, FormRequest, JsonRequest, XmlRpcRequest})

#: Value types that always unpickle: a request whose meta and cb_kwargs hold only these
#: is not read back after encoding.
_PLAIN_TYPES = frozenset({str, int, float, bool, bytes, type(None)})


def _plain(values: Any) -> bool:
    return all(type(value) in _PLAIN_TYPES for value in values)


_URL_LEN = 2  # bytes of the URL length prefix in a frontier record


def pack_record(url: str, blob: bytes) -> bytes:
    """A frontier record: the URL first, so routing (host, PLD) needs no unpickling."""
    raw = url.encode("utf-8")
    if len(raw) >= 1 << 16:
        raise ValueError(f"URL of {len(raw)} bytes is too long to queue")
    return len(raw).to_bytes(_URL_LEN, "little") + raw + blob


def record_url(record: bytes) -> str:
    size = int.from_bytes(record[:_URL_LEN], "little")
    return record[_URL_LEN : _URL_LEN + size].decode("utf-8")


def record_blob(record: bytes) -> bytes:
    size = int.from_bytes(record[:_URL_LEN], "little")
    return record[_URL_LEN + size :]
