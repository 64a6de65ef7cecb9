// Request signing as the awn CLI signs (shared/auth): HTTP Message
// Signatures (RFC 9421) in the Web Bot Auth profile, Ed25519 through
// WebCrypto, a fresh nonce per request and the body covered by its
// Content-Digest. The server rebuilds the same signature base.

const enc = new TextEncoder();

export function b64(bytes) {
  let s = "";
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s);
}

export function b64url(bytes) {
  return b64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function hex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

function unb64url(s) {
  const std = s.replace(/-/g, "+").replace(/_/g, "/");
  const bin = atob(std + "===".slice((std.length + 3) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

// loadKey reads a PKCS#8 PEM Ed25519 private key (the awn key file, or the
// harness's dev key) and returns the identity it names: the CryptoKey to
// sign with, the keyid (RFC 7638 thumbprint), the awnId and the public key
// as standard base64 (what join and world creation carry).
export async function loadKey(pemText) {
  const m = /-----BEGIN PRIVATE KEY-----([A-Za-z0-9+/=\s]+)-----END PRIVATE KEY-----/.exec(pemText || "");
  if (!m) throw new Error('not a PEM "PRIVATE KEY" (the awn key file is one: ~/.config/awn/key.pem)');
  const der = Uint8Array.from(atob(m[1].replace(/\s+/g, "")), (c) => c.charCodeAt(0));
  let extractable;
  try {
    extractable = await crypto.subtle.importKey("pkcs8", der, { name: "Ed25519" }, true, ["sign"]);
  } catch (e) {
    throw new Error("not an Ed25519 private key this browser can use (" + e.message + ")");
  }
  const jwk = await crypto.subtle.exportKey("jwk", extractable);
  const key = await crypto.subtle.importKey("pkcs8", der, { name: "Ed25519" }, false, ["sign"]);
  const pub = unb64url(jwk.x);
  const keyid = b64url(await sha256(enc.encode('{"crv":"Ed25519","kty":"OKP","x":"' + jwk.x + '"}')));
  const awnId = "aw:sha256:" + hex(await sha256(pub));
  return { key, keyid, awnId, publicKey: b64(pub) };
}

export function randomNonce() {
  return b64url(crypto.getRandomValues(new Uint8Array(32)));
}

// signatureHeaders returns the headers that sign one request: method, the
// absolute URL it goes to, and its body bytes (empty for none). opts.now
// (seconds) and opts.nonce fix what is otherwise the clock and a random
// nonce (tests compare with the Go signer).
export async function signatureHeaders(id, method, url, body, opts = {}) {
  const u = new URL(url);
  const digest = "sha-256=:" + b64(await sha256(body || new Uint8Array())) + ":";
  const created = opts.now ?? Math.floor(Date.now() / 1000);
  const nonce = opts.nonce ?? randomNonce();
  const params =
    '("@method" "@authority" "@path" "@query" "content-digest")' +
    ";created=" + created + ";expires=" + (created + 300) +
    ';nonce="' + nonce + '";keyid="' + id.keyid + '";alg="ed25519";tag="web-bot-auth"';
  const base =
    '"@method": ' + method.toUpperCase() + "\n" +
    '"@authority": ' + u.host.toLowerCase() + "\n" +
    '"@path": ' + (u.pathname || "/") + "\n" +
    '"@query": ?' + u.search.replace(/^\?/, "") + "\n" +
    '"content-digest": ' + digest + "\n" +
    '"@signature-params": ' + params;
  const sig = await crypto.subtle.sign({ name: "Ed25519" }, id.key, enc.encode(base));
  return {
    "Content-Digest": digest,
    "Signature-Input": "sig1=" + params,
    Signature: "sig1=:" + b64(sig) + ":",
  };
}
