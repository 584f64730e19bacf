// Sign-in: an API key typed by the user, or the configured OIDC provider (authorization code with
// PKCE, as a public client: no secret in the page). The credential lives in sessionStorage, so it
// is gone when the tab closes; the strict CSP (no inline or foreign script) guards it meanwhile.
import { LocalisedError, text } from "./i18n.js";
const TOKEN = "rag.token";
const KIND = "rag.token-kind";
const PKCE = "rag.oidc-pkce";
export function storedToken() {
    const token = sessionStorage.getItem(TOKEN);
    const kind = sessionStorage.getItem(KIND);
    return token && kind ? { token, kind } : null;
}
export function storeToken(token, kind) {
    sessionStorage.setItem(TOKEN, token);
    sessionStorage.setItem(KIND, kind);
}
export function forgetToken() {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(KIND);
}
function base64url(bytes) {
    let text = "";
    for (const byte of bytes)
        text += String.fromCharCode(byte);
    return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function randomString() {
    return base64url(crypto.getRandomValues(new Uint8Array(32)));
}
function redirectUri() {
    return `${location.origin}/`;
}
/** Leaves for the provider's sign-in page; it sends the browser back to ``/?code=…&state=…``. */
export async function startOidc(config) {
    const verifier = randomString();
    const state = randomString();
    sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state }));
    const challenge = base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
    const url = new URL(config.authorization_url);
    url.search = new URLSearchParams({
        response_type: "code",
        client_id: config.client_id,
        redirect_uri: redirectUri(),
        scope: config.scope,
        state,
        code_challenge: challenge,
        code_challenge_method: "S256",
    }).toString();
    location.assign(url.toString());
}
/** On the way back from the provider: the code exchanged for a token, or null if this is not a return. */
export async function finishOidc(config) {
    const params = new URLSearchParams(location.search);
    const code = params.get("code");
    const error = params.get("error");
    if (!code && !error)
        return null;
    history.replaceState(null, "", "/");
    if (error)
        throw new LocalisedError(text("oidcRefused", { reason: params.get("error_description") ?? error }));
    const saved = sessionStorage.getItem(PKCE);
    sessionStorage.removeItem(PKCE);
    if (config === null || saved === null)
        throw new LocalisedError(text("oidcNotStarted"));
    const { verifier, state } = JSON.parse(saved);
    if (params.get("state") !== state)
        throw new LocalisedError(text("oidcStateMismatch"));
    const response = await fetch(config.token_url, {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
            grant_type: "authorization_code",
            code: code ?? "",
            redirect_uri: redirectUri(),
            client_id: config.client_id,
            code_verifier: verifier,
        }).toString(),
    });
    if (!response.ok)
        throw new LocalisedError(text("oidcNoToken", { status: String(response.status) }));
    const tokens = (await response.json());
    const token = tokens.access_token ?? tokens.id_token;
    if (!token)
        throw new LocalisedError(text("oidcEmptyToken"));
    return token;
}
