"""Other tools' subscriber exports in (Mailchimp, Substack, Ghost, Buttondown, listmonk, this
tool's CSV); plain values out: subscribers with their consent, suppressions, refused rows.

formats.py knows each tool's columns (rows.py the row it maps), values.py their times and IPs,
reader.py reads a file (or the ZIP it came in) into Outcomes (outcomes.py), checked as the lists
are.
"""

from newsletter.importers.formats import FORMATS
from newsletter.importers.outcomes import (
    Consent,
    ExportFile,
    Imported,
    ImportedSuppression,
    ImportReport,
    Origin,
    Outcome,
    Refused,
)
from newsletter.importers.reader import Export, read_export

__all__ = [
    "FORMATS",
    "Consent",
    "Export",
    "ExportFile",
    "ImportReport",
    "Imported",
    "ImportedSuppression",
    "Origin",
    "Outcome",
    "Refused",
    "read_export",
]
