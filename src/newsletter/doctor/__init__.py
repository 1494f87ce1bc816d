"""`newsletter doctor`: is this project ready for production? Each check a Diagnosis."""

from newsletter.doctor.diagnosis import Diagnosis
from newsletter.doctor.examine import MIN_FREE, examine

__all__ = ["MIN_FREE", "Diagnosis", "examine"]
