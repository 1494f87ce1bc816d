"""DATA through aiosmtplib's internals: the API we rely on, and the bytes on the wire."""

from __future__ import annotations

import inspect

import aiosmtplib
from aiosmtplib.protocol import SMTPProtocol

from newsletter.send.upload import upload
from support.smtp import FaultyHandler, make_message, start


def test_the_aiosmtplib_internals_we_use_are_still_there() -> None:
    # If this fails, aiosmtplib changed what send/upload.py reaches into: read its changelog,
    # adapt upload(), then move the version bound in pyproject.toml.
    assert callable(getattr(SMTPProtocol, "write", None))
    assert "timeout" in inspect.signature(SMTPProtocol.read_response).parameters
    assert "protocol" in {*vars(aiosmtplib.SMTP()), *dir(aiosmtplib.SMTP)}


async def test_a_vouched_message_arrives_byte_for_byte() -> None:
    handler = FaultyHandler()
    message = make_message(7, body=b"line one\r\n.dot\r\n").model_copy(update={"smtp_ready": False})
    async with start(handler) as server:
        smtp = aiosmtplib.SMTP(hostname=server.host, port=server.port, start_tls=False)
        await smtp.connect()
        await smtp.mail(message.sender)
        await smtp.rcpt(message.recipient)
        reply = await upload(smtp, message)
        await smtp.quit()
    assert reply.code == 250
    assert [r.data for r in handler.received] == [message.data]
