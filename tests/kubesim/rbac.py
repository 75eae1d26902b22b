"""Authentication as the apiserver's union authenticator does it, and RBAC authorization for scenarios that
turn it on (`rbac: true`).

Upstream: `k8s.io/apiserver/pkg/authentication` (x509 `CommonNameUserConversion`, the bearer token
authenticator, `AuthenticatedGroupAdder`, the anonymous authenticator behind `union.NewFailOnError`),
`plugin/pkg/auth/authorizer/rbac` (rule matching, `RuleAllows`, binding subjects), the privileged group
`system:masters`, the apiserver's `ForbiddenStatusError` (the 403 message) and `bootstrappolicy` (what every
authenticated user may read: `system:discovery`, `system:public-info-viewer`, `system:basic-user`).

- Who asks, first match wins: a client certificate verified against the run's CA is the user of its CN, in the
  groups of its Os; a bearer token is its user (the kubeconfig's admin token: `kubernetes-admin` in
  `system:masters`; a scenario user's token: that user in its `groups`); any other bearer token is 401
  `Unauthorized` (never anonymous); no credentials at all is `system:anonymous` in `system:unauthenticated`.
  Authenticated users are also in `system:authenticated`; `system:serviceaccount:<ns>:<name>` users are also in
  `system:serviceaccounts` and `system:serviceaccounts:<ns>` and match ServiceAccount subjects.
- Without RBAC every authenticated or anonymous request is allowed (`AlwaysAllow`). With RBAC, `system:masters`
  is allowed everything; resource requests are allowed when a ClusterRoleBinding (cluster-wide) or a
  RoleBinding in the request's namespace binds the user, one of its groups or its service account to a
  (Cluster)Role with a rule whose apiGroups, resources (`pods`, `pods/eviction`, `*`, `*/status`), verbs and
  resourceNames match.
- Non-resource requests (`/version`, `/api`, `/apis/...`, `/openapi/...`, `/healthz`) are allowed for every
  authenticated user, as the bootstrap discovery roles allow them; anonymous requests only get `/version` and
  the health paths (`system:public-info-viewer`).

Simplified: no aggregated ClusterRoles (`aggregationRule`), no `nonResourceURLs` rules for other paths, no
impersonation, no escalation checks on writing RBAC objects, and a `resourceNames` rule never matches create
or a list/watch of more than one object; a list or watch with a `metadata.name=<name>` field selector is asked
about that name, as upstream's RequestInfo resolver does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ApiError

ADMIN = "kubernetes-admin"
MASTERS = "system:masters"          # upstream's privileged group: every request is allowed
ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
# what `system:public-info-viewer` lets everyone, anonymous too, read
PUBLIC_INFO_PATHS = frozenset(("/healthz", "/livez", "/readyz", "/version"))
RBAC_GROUP = "rbac.authorization.k8s.io"
USER_KEYS = frozenset(("name", "token", "groups", "certificate"))


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = field(default_factory=tuple)

    @property
    def all_groups(self) -> tuple[str, ...]:
        if self.name == ANONYMOUS or UNAUTHENTICATED in self.groups:
            return self.groups      # AuthenticatedGroupAdder leaves the anonymous user alone
        groups = list(self.groups) + [AUTHENTICATED]
        parts = self.name.split(":")
        if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
            groups += ["system:serviceaccounts", f"system:serviceaccounts:{parts[2]}"]
        return tuple(dict.fromkeys(groups))


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do, as the authorizer sees it."""
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def resource_request(self) -> bool:
        return bool(self.resource)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(user: User, attrs: Attributes, reason: str = "") -> ApiError:
    """403 with the apiserver's message: `<resource>[.<group>] ["<name>"] is forbidden: User "<u>" cannot ...`."""
    if not attrs.resource_request:
        message = f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
        return ApiError(403, "Forbidden", message + (f": {reason}" if reason else ""), {})
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    message = (f'{subject} is forbidden: User "{user.name}" cannot {attrs.verb} resource "{resource}" '
               f'in API group "{attrs.group}" {scope}')
    if reason:
        message += f": {reason}"
    details = {"kind": attrs.resource}
    if attrs.group:
        details["group"] = attrs.group
    if attrs.name:
        details["name"] = attrs.name
    return ApiError(403, "Forbidden", message, details)


def _matches(values: list | None, wanted: str) -> bool:
    return bool(values) and ("*" in values or wanted in values)


def _resource_matches(resources: list | None, attrs: Attributes) -> bool:
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    for item in resources or []:
        if item in ("*", combined):
            return True
        if attrs.subresource and item == f"*/{attrs.subresource}":
            return True
    return False


def rule_allows(rule: dict, attrs: Attributes) -> bool:
    """RBAC `RuleAllows` for a resource request."""
    if not _matches(rule.get("verbs"), attrs.verb):
        return False
    if not _matches(rule.get("apiGroups"), attrs.group):
        return False
    if not _resource_matches(rule.get("resources"), attrs):
        return False
    names = rule.get("resourceNames")
    return not names or (bool(attrs.name) and attrs.name in names)


def _subject_matches(subject: dict, user: User, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == user.name
    if kind == "Group":
        return subject.get("name") in user.all_groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{subject.get('name')}"
    return False


ANONYMOUS_USER = User(ANONYMOUS, (UNAUTHENTICATED,))
ADMIN_USER = User(ADMIN, (MASTERS,))


def check_user(entry: dict) -> None:
    """A scenario or run-time user: `{name, token, groups, certificate}`, with a token or a certificate."""
    if not isinstance(entry, dict) or set(entry) - USER_KEYS or not entry.get("name") or \
            not (entry.get("token") or entry.get("certificate")):
        shown = sorted(entry) if isinstance(entry, dict) else entry
        raise ValueError(f"needs name and token or certificate: true (and optional groups), got {shown}")


class Authorizer:
    """Who asks (tokens, verified client certificates) and the decision; the (Cluster)Roles and bindings are
    read from the cluster at each request."""

    def __init__(self, enabled: bool = False, users: list[dict] | None = None, admin_token: str = ""):
        self.enabled = enabled
        self.tokens: dict[str, User] = {admin_token: ADMIN_USER} if admin_token else {}
        for entry in users or []:
            self.add_user(entry)

    def add_user(self, entry: dict) -> User:
        """A user; its token, if it has one, authenticates it from now on (a certificate needs no registration:
        the CA's signature is the proof)."""
        check_user(entry)
        user = User(str(entry["name"]), tuple(entry.get("groups") or ()))
        if entry.get("token"):
            self.tokens[str(entry["token"])] = user
        return user

    def authenticate(self, authorization: str, certificate: User | None = None) -> User:
        """The user of a request: its verified client certificate's, else its bearer token's (an unknown token
        is 401, never anonymous), else `system:anonymous`."""
        if certificate is not None:
            return certificate
        scheme, token = authorization.strip().partition(" ")[::2]
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return ANONYMOUS_USER
        user = self.tokens.get(token)
        if user is None:
            raise unauthorized()
        return user

    def authorize(self, cluster, user: User, attrs: Attributes) -> None:
        """Raise 403 unless the user may do what `attrs` asks in `cluster`."""
        if not self.enabled or MASTERS in user.all_groups:
            return
        if not attrs.resource_request:
            public = (attrs.path.rstrip("/") or "/") in PUBLIC_INFO_PATHS
            if attrs.verb == "get" and (public or AUTHENTICATED in user.all_groups):
                return
            raise forbidden(user, attrs)
        missing: list[str] = []
        for rules in self._rule_sets(cluster, user, attrs.namespace, missing):
            if any(rule_allows(rule, attrs) for rule in rules):
                return
        raise forbidden(user, attrs, "RBAC: " + ", ".join(missing) if missing else "")

    def _rule_sets(self, cluster, user: User, namespace: str, missing: list[str]):
        store = cluster.store
        for entry in store.entries(f"clusterrolebindings.{RBAC_GROUP}"):
            binding = entry.obj
            if any(_subject_matches(s, user, "") for s in binding.get("subjects") or []):
                yield self._role_rules(cluster, binding.get("roleRef") or {}, "", missing)
        if not namespace:
            return
        for entry in store.entries(f"rolebindings.{RBAC_GROUP}", namespace):
            binding = entry.obj
            if any(_subject_matches(s, user, namespace) for s in binding.get("subjects") or []):
                yield self._role_rules(cluster, binding.get("roleRef") or {}, namespace, missing)

    @staticmethod
    def _role_rules(cluster, ref: dict, namespace: str, missing: list[str]) -> list[dict]:
        if ref.get("kind") == "ClusterRole":
            entry = cluster.store.get(f"clusterroles.{RBAC_GROUP}", "", ref.get("name", ""))
            what = f'clusterrole.{RBAC_GROUP} "{ref.get("name")}" not found'
        else:
            entry = cluster.store.get(f"roles.{RBAC_GROUP}", namespace, ref.get("name", ""))
            what = f'role.{RBAC_GROUP} "{ref.get("name")}" not found'
        if entry is None:
            missing.append(what)
            return []
        return entry.obj.get("rules") or []
