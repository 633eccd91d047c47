"""The client side: a connection, the stream manager, the writer, serializers, fetch sessions."""

from connector.client.connection import StoreClient, parse_uri
from connector.client.fetch_session import FetchSession
from connector.client.routing import key_position
from connector.client.serializers import (
    BytesSerializer,
    JsonSerializer,
    Serializer,
    StringSerializer,
    serializer_named,
)
from connector.client.stream_manager import StreamManager
from connector.client.writer import EventWriter, WriterConfig

__all__ = [
    "BytesSerializer",
    "EventWriter",
    "FetchSession",
    "JsonSerializer",
    "Serializer",
    "StoreClient",
    "StreamManager",
    "StringSerializer",
    "WriterConfig",
    "key_position",
    "parse_uri",
    "serializer_named",
]
