"""The privacy policy: which tables are private, what one privacy unit is, what is public.

A policy is read from YAML (:meth:`Policy.from_yaml`), a dict (:meth:`Policy.from_dict`) or
SmartNoise SQL metadata (:meth:`Policy.from_smartnoise_yaml`). Everything is validated up front:
a policy privplan does not fully understand is refused with a :class:`PolicyError` saying what is
wrong, where (``table.column`` and the YAML key path), why it matters for privacy, and how to fix
it — a silently ignored typo would mean a policy that protects less than its author believes.

The package is cut by concern: :mod:`~privplan.policy.model` (columns and tables),
:mod:`~privplan.policy.document` (the whole :class:`Policy`), :mod:`~privplan.policy.native`
and :mod:`~privplan.policy.native_columns` (privplan's own format: tables, columns),
:mod:`~privplan.policy.smartnoise` (SmartNoise metadata),
:mod:`~privplan.policy.strict_yaml` (YAML reading), :mod:`~privplan.policy.values` (typed values
and resolutions) and :mod:`~privplan.policy.checks` (error locations and shared checks). Every
name other modules use is re-exported here.

>>> policy = Policy.from_yaml('''
... tables:
...   visits:
...     privacy_unit: patient_id
...     max_rows_per_unit: 10
...     columns:
...       patient_id: {type: int}
...       cost: {type: float, lower: 0, upper: 10000}
...   hospitals: {public: true}
... ''')
>>> policy.table("VISITS").column("Cost").require_bounds("SUM(cost)", "visits")
(0.0, 10000.0)
>>> policy.table("visits").table_model().unit.max_rows
10
"""

from __future__ import annotations

from privplan.policy.document import Policy
from privplan.policy.model import NEIGHBOURHOODS as NEIGHBOURHOODS
from privplan.policy.model import ColumnPolicy, TablePolicy
from privplan.policy.model import FrozenMap as FrozenMap
from privplan.policy.strict_yaml import load_strict_yaml as load_strict_yaml
from privplan.policy.values import COLUMN_TYPES as COLUMN_TYPES
from privplan.policy.values import ColumnType

__all__ = ["ColumnPolicy", "ColumnType", "Policy", "TablePolicy"]
