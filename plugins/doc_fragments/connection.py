# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of the collection's connection layer beyond kubernetes.core's k8s_auth_options."""

from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    """Retries and the time bound of reading the cluster."""

    DOCUMENTATION = r"""
options:
  api_retries:
    description:
      - How many times one API request is retried after an answer that may change, that is HTTP 429 (too many requests),
        500, 502, 503, 504.
      - A connection that is refused, or dropped without an answer (an API server restarting during an upgrade), is retried
        until I(api_timeout) runs out, however many times that takes.
      - The wait before a retry is what the server asks for in C(Retry-After), else 0.5 s doubling up to 10 s.
      - Other errors (401, 403, 404 on an object, 422, certificate errors) are not retried.
    type: int
    default: 5
  api_timeout:
    description:
      - The time in seconds that all API requests of one module run may take together, retries and waits included.
      - A retry whose wait would pass this deadline is not made; the module fails with the last API answer.
    type: int
    default: 120
"""
