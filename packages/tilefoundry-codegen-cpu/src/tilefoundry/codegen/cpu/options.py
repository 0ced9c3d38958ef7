"""The compile options of the cpu target, declared once; the catalog, emitter and builder read them here."""

from tilefoundry.ir.target import Option

from .catalog import ISA_LEVELS, NAME

ISA = Option(
    "isa", (*(level.name for level in ISA_LEVELS), None), None,
    "describe a narrower vector ISA than the host's (its catalog drops wider atoms); None: the host's widest",
    NAME,
)
VECTOR_MATH = Option(
    "vector_math", (True, False), True,
    "glibc's libmvec vector math (<= 4 ulp) / scalar glibc math (<= 1 ulp for exp, log), see Precision",
    NAME,
)
HUGE_PAGES = Option(
    "huge_pages", (True, False), True,
    "advise 2 MiB pages on outputs and temporaries before their first touch / leave the default pages",
    NAME,
)
OPTIONS = (ISA, VECTOR_MATH, HUGE_PAGES)
