"""Erasing a subject erases their working memory too, and checks that it did.

Working items are deleted first: if the working-memory server is unreachable,
the erasure fails (``Unavailable``) before any record is touched, and can be run
again whole. After the records are erased, the user's remaining working items
are counted; the receipt lists ``working memory`` among its checks, and among
its failures when any remain (a writer that set an item during the erasure).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from engram.lifecycle.forget import ErasureReceipt
from engram.working.base import WorkingStore

__all__ = ["CHECK", "erase_subject"]

CHECK = "working memory"


def erase_subject(working: WorkingStore, tenant_id: str, user_id: str,
                  erase_records: Callable[[], ErasureReceipt]) -> ErasureReceipt:  # fmt: skip
    """Erase the user's working items, then run ``erase_records``; one receipt for both."""
    removed = working.erase_subject(tenant_id, user_id)
    receipt = erase_records()
    left = working.subject_residue(tenant_id, user_id)
    failed = (*receipt.failed, CHECK) if left else receipt.failed
    return dataclasses.replace(receipt, working=removed, checked=(*receipt.checked, CHECK),
                               failed=failed, verified=receipt.verified and not left)  # fmt: skip
