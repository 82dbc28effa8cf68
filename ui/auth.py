"""Sign-in and roles for the pages: who is here, what they may do, and the sign-in gate.

Sign-in is Streamlit's own ``st.login`` (OpenID Connect), on when ``.streamlit/secrets.toml``
has an ``[auth]`` section. Roles come from the settings (``LATENCYLAB_OPERATORS``,
``LATENCYLAB_ADMINS``: e-mails or ``@domain`` entries); anyone signed in and not listed
is a viewer. Without ``[auth]`` the app is a local tool: everyone is an operator, on a
loopback address only (see :func:`engine.settings.serve_problem`). Viewer mode makes
everyone a viewer either way.

Viewers see every page; launching, cancelling, retrying, deleting and calibrating need
the operator role: pages disable those buttons with :func:`cannot`'s reason, and the
handlers ask :func:`cannot` again before they act.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Any

import streamlit as st

from engine.settings import Settings, get_settings, is_loopback, principals, serve_problem

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
RANK = {VIEWER: 0, OPERATOR: 1, ADMIN: 2}
# What each action needs, and the words a refusal uses for it.
ACTIONS: dict[str, tuple[str, str]] = {
    "launch": (OPERATOR, "launching jobs"),
    "cancel": (OPERATOR, "cancelling jobs"),
    "retry": (OPERATOR, "retrying jobs"),
    "delete": (OPERATOR, "deleting runs"),
    "calibrate": (OPERATOR, "running the calibration micro-benchmark"),
}


@dataclass(frozen=True)
class Identity:
    """Who is using this session: their role, the name their actions are recorded under."""

    role: str
    actor: str | None  # recorded as submitted_by / cancelled_by / deleted_by; None when read-only
    email: str | None = None
    signed_in: bool = False
    viewer_mode: bool = False


def role_for(email: str | None, settings: Settings) -> str:
    """The role of a signed-in e-mail: admin, operator, or viewer (not listed, or no e-mail)."""
    if not email:
        return VIEWER
    email = email.strip().lower()
    domain = "@" + email.rsplit("@", 1)[-1] if "@" in email else None
    for role, listed in ((ADMIN, settings.admins), (OPERATOR, settings.operators)):
        entries = principals(listed)
        if email in entries or (domain is not None and domain in entries):
            return role
    return VIEWER


def auth_configured() -> bool:
    """True when Streamlit's secrets have an ``[auth]`` section (sign-in is on)."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file, or one that does not parse: no sign-in
        return False


def _user_email() -> str | None:
    email = st.user.get("email")
    if not isinstance(email, str) or not email.strip():
        return None
    if st.user.get("email_verified") is False:  # the provider says it is not the user's
        return None
    return email.strip().lower()


def current() -> Identity:
    """The identity of this session (call after :func:`gate` let the page through)."""
    settings = get_settings()
    if auth_configured():
        if not st.user.is_logged_in:
            return Identity(role=VIEWER, actor=None)
        email = _user_email()
        role = VIEWER if settings.viewer_mode else role_for(email, settings)
        return Identity(role=role, actor=email, email=email, signed_in=True, viewer_mode=settings.viewer_mode)
    if settings.viewer_mode:
        return Identity(role=VIEWER, actor=None, viewer_mode=True)
    return Identity(role=OPERATOR, actor=_local_actor())


def _local_actor() -> str:
    """Without sign-in: the app's OS user on loopback; ``anonymous@IP`` for a remote browser (open mode)."""
    ip = _client_ip()
    if ip and not is_loopback(ip):
        return f"anonymous@{ip}"
    try:
        return f"local:{getpass.getuser()}"
    except (KeyError, OSError):
        return "local"


def _client_ip() -> str | None:
    try:
        ip = st.context.ip_address
    except Exception:  # noqa: BLE001 - no browser session (e.g. a bare script run)
        return None
    return ip if isinstance(ip, str) and ip else None


def cannot(action: str, who: Identity | None = None) -> str | None:
    """Why this session may not do ``action`` (one line), or None when it may."""
    needed, words = ACTIONS[action]
    who = who or current()
    if RANK[who.role] >= RANK[needed]:
        return None
    if who.viewer_mode:
        return f"viewer mode: {words} is disabled on this deployment"
    if not who.signed_in:
        return f"sign in to use {words}"
    return f"{words} needs the {needed} role; {who.email or 'this account'} is a {who.role}"


def actor() -> str | None:
    """The name this session's actions are recorded under."""
    return current().actor


# -- the gate (app.py) ---------------------------------------------------------------------
def _served_host() -> str:
    """The address this server listens on ('' for every interface)."""
    return str(st.get_option("server.address") or "")


def open_serving() -> tuple[str | None, str | None]:
    """(refusal, warning) for this server: a non-loopback address (or a remote browser)
    needs sign-in or viewer mode, unless ``LATENCYLAB_ALLOW_OPEN`` overrides it."""
    settings = get_settings()
    signed_in = auth_configured()
    host = _served_host()
    ip = _client_ip()
    if host and not is_loopback(host):
        return serve_problem(host, signed_in=signed_in, settings=settings)
    if ip and not is_loopback(ip):
        return serve_problem(host, signed_in=signed_in, settings=settings)
    return None, None


def _providers() -> list[str | None]:
    """The providers to offer: ``[None]`` for settings directly under [auth], else each named one."""
    section: Any = st.secrets.get("auth", {})
    named = [key for key, value in section.items() if hasattr(value, "keys")]
    return [None] if "client_id" in section or not named else named


def sign_in_page() -> None:
    """The only page for a signed-out user when sign-in is on."""
    st.title("LatencyLab")
    st.write("Sign in to see the benchmarks of this team.")
    for provider in _providers():
        label = "Sign in" if provider is None else f"Sign in with {provider}"
        if st.button(label, type="primary", key=f"login_{provider or 'default'}", icon=":material/login:"):
            st.login(provider)


def gate(url_paths: list[str]) -> bool:
    """True when the pages may run; else it rendered the refusal or the sign-in page (also at
    every page's ``url_paths``, so a deep link asks for sign-in instead of "page not found")."""
    refusal, warning = open_serving()
    if refusal:
        st.error(f"LatencyLab: {refusal}", icon=":material/block:")
        return False
    if warning:
        st.warning(warning, icon=":material/warning:")
    if auth_configured() and not st.user.is_logged_in:
        pages = [st.Page(sign_in_page, title="Sign in", icon=":material/login:", url_path="signin", default=True)]
        pages += [st.Page(sign_in_page, title="Sign in", url_path=path) for path in url_paths if path != "signin"]
        st.navigation(pages, position="hidden").run()
        return False
    return True


def sidebar_identity() -> None:
    """Who is signed in, their role, and the sign-out button (sidebar)."""
    who = current()
    if not who.signed_in:
        return
    name = (who.email or "an account without e-mail").replace("`", "")
    st.caption(f"Signed in as `{name}` · {who.role}")
    if st.button("Sign out", key="logout", icon=":material/logout:"):
        st.logout()
