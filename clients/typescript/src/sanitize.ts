// The redaction QueueBox applies, for last_error values and log lines: masks secret-looking values
// and cuts the text to MAX_ERROR_LENGTH bytes of UTF-8 on a character boundary. It errs towards
// masking: a masked harmless value costs readability, a leaked one a rotation.

const MASK = "***";

/** The most bytes (UTF-8) of error text written to `last_error`. */
export const MAX_ERROR_LENGTH = 2048;

const SECRET_KEY_FRAGMENTS = [
  "password", "passwd", "pwd", "secret", "token", "apikey", "authorization", "cookie",
  "signature", "credential", "session", "privatekey",
];

const WHITESPACE = /\s/u;

/** Masks passwords in URLs, Bearer/Basic credentials and the values of secret-bearing keys, then cuts. */
export function sanitize(text: string): string {
  return cut(maskKeyedValues(maskSchemes(maskUrlPasswords(text))), MAX_ERROR_LENGTH);
}

/** `sanitize` applied to an error's text (its message, or its string form). */
export function sanitizeError(error: unknown): string {
  if (error instanceof Error) {
    return sanitize(error.message === "" ? String(error) : error.message);
  }
  return sanitize(String(error));
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function cut(text: string, max: number): string {
  const bytes = encoder.encode(text);
  if (bytes.length <= max) return text;
  let end = max;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return decoder.decode(bytes.subarray(0, end));
}

function maskUrlPasswords(text: string): string {
  let out = "";
  let rest = text;
  for (;;) {
    const pos = rest.indexOf("://");
    if (pos < 0) break;
    out += rest.slice(0, pos + 3);
    const tail = rest.slice(pos + 3);
    let end = 0;
    while (end < tail.length) {
      const c = tail[end] ?? "";
      if (c === "/" || c === '"' || c === "'" || WHITESPACE.test(c)) break;
      end++;
    }
    const authority = tail.slice(0, end);
    const at = authority.lastIndexOf("@");
    const colon = authority.indexOf(":");
    if (at >= 0 && colon >= 0 && colon < at) {
      out += authority.slice(0, colon + 1) + MASK + authority.slice(at);
    } else {
      out += authority;
    }
    rest = tail.slice(end);
  }
  return out + rest;
}

function splitInclusive(text: string): string[] {
  const words: string[] = [];
  let current = "";
  for (const c of text) {
    current += c;
    if (WHITESPACE.test(c)) {
      words.push(current);
      current = "";
    }
  }
  if (current !== "") words.push(current);
  return words;
}

function maskSchemes(text: string): string {
  const words = splitInclusive(text);
  let out = "";
  for (let i = 0; i < words.length; i++) {
    const word = words[i] ?? "";
    out += word;
    const bare = word.trim().toLowerCase();
    const last = word.slice(-1);
    if ((bare === "bearer" || bare === "basic") && WHITESPACE.test(last) && i + 1 < words.length) {
      i++;
      const trailing = [...(words[i] ?? "")].filter((c) => WHITESPACE.test(c)).join("");
      out += MASK + trailing;
    }
  }
  return out;
}

function isSecretKey(key: string): boolean {
  const normal = key.replace(/[^A-Za-z0-9]/g, "").toLowerCase();
  return normal !== "" && SECRET_KEY_FRAGMENTS.some((f) => normal.includes(f));
}

function isAsciiAlnum(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

function isAsciiWhitespace(c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 12 || c === 13;
}

const EQ = 61, COLON = 58, DQ = 34, SQ = 39, US = 95, DASH = 45, SPACE = 32;

function maskKeyedValues(text: string): string {
  let out = "";
  let copied = 0;
  let i = 0;
  const at = (k: number): number => text.charCodeAt(k);
  while (i < text.length) {
    const sep = at(i);
    if (sep !== EQ && sep !== COLON) {
      i++;
      continue;
    }
    let keyEnd = i;
    if (keyEnd > 0 && (at(keyEnd - 1) === DQ || at(keyEnd - 1) === SQ)) keyEnd--;
    let keyStart = keyEnd;
    while (keyStart > 0 && (isAsciiAlnum(at(keyStart - 1)) || at(keyStart - 1) === US || at(keyStart - 1) === DASH)) {
      keyStart--;
    }
    if (keyStart === keyEnd || !isSecretKey(text.slice(keyStart, keyEnd))) {
      i++;
      continue;
    }
    let v = i + 1;
    while (v < text.length && at(v) === SPACE) v++;
    let quote = 0;
    if (v < text.length && (at(v) === DQ || at(v) === SQ)) {
      quote = at(v);
      v++;
    }
    let end = v;
    while (end < text.length) {
      const b = at(end);
      const stop = quote !== 0
        ? b === quote
        : sep === COLON
          ? b === 10 || b === 13 || b === 44 || b === 125
          : isAsciiWhitespace(b) || b === 38 || b === 44 || b === 59;
      if (stop) break;
      end++;
    }
    if (end > v) {
      out += text.slice(copied, v) + MASK;
      copied = end;
    }
    i = Math.max(end, i + 1);
  }
  return out + text.slice(copied);
}
