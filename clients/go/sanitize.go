package queuebox

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// mask replaces a masked value.
const mask = "***"

// MaxErrorLength is the most bytes of error text written to last_error.
const MaxErrorLength = 2048

// secretKeyFragments make a key secret-bearing (compared on its letters and digits, lower-cased).
var secretKeyFragments = []string{
	"password", "passwd", "pwd", "secret", "token", "apikey", "authorization", "cookie",
	"signature", "credential", "session", "privatekey",
}

// Sanitize masks secret-looking values (passwords in URLs, Bearer and Basic credentials, the
// value after a key such as password=, token: or "api_key":) and cuts the text to MaxErrorLength
// bytes on a character boundary. It is the redaction QueueBox applies, and every last_error value
// and log field of this library passes through it. It errs towards masking.
func Sanitize(text string) string {
	masked := maskKeyedValues(maskSchemes(maskURLPasswords(text)))
	return cut(masked, MaxErrorLength)
}

// SanitizeError is Sanitize applied to err.Error(); a nil error gives "".
func SanitizeError(err error) string {
	if err == nil {
		return ""
	}
	return Sanitize(err.Error())
}

func cut(text string, max int) string {
	if len(text) <= max {
		return text
	}
	end := max
	for end > 0 && !utf8.RuneStart(text[end]) {
		end--
	}
	return text[:end]
}

// maskURLPasswords turns scheme://user:password@host into scheme://user:***@host.
func maskURLPasswords(text string) string {
	var out strings.Builder
	rest := text
	for {
		pos := strings.Index(rest, "://")
		if pos < 0 {
			break
		}
		out.WriteString(rest[:pos+3])
		tail := rest[pos+3:]
		end := strings.IndexFunc(tail, func(r rune) bool {
			return r == '/' || unicode.IsSpace(r) || r == '"' || r == '\''
		})
		if end < 0 {
			end = len(tail)
		}
		authority := tail[:end]
		at, colon := strings.LastIndexByte(authority, '@'), strings.IndexByte(authority, ':')
		if at >= 0 && colon >= 0 && colon < at {
			out.WriteString(authority[:colon+1])
			out.WriteString(mask)
			out.WriteString(authority[at:])
		} else {
			out.WriteString(authority)
		}
		rest = tail[end:]
	}
	out.WriteString(rest)
	return out.String()
}

// splitInclusive cuts text after every white-space character.
func splitInclusive(text string) []string {
	var words []string
	start := 0
	for i, r := range text {
		if unicode.IsSpace(r) {
			end := i + utf8.RuneLen(r)
			words = append(words, text[start:end])
			start = end
		}
	}
	if start < len(text) {
		words = append(words, text[start:])
	}
	return words
}

// maskSchemes turns "Bearer abc" and "Basic abc" into "Bearer ***".
func maskSchemes(text string) string {
	var out strings.Builder
	words := splitInclusive(text)
	for i := 0; i < len(words); i++ {
		word := words[i]
		out.WriteString(word)
		bare := strings.TrimFunc(word, unicode.IsSpace)
		last, _ := utf8.DecodeLastRuneInString(word)
		if (strings.EqualFold(bare, "bearer") || strings.EqualFold(bare, "basic")) &&
			unicode.IsSpace(last) && i+1 < len(words) {
			i++
			var trailing strings.Builder
			for _, r := range words[i] {
				if unicode.IsSpace(r) {
					trailing.WriteRune(r)
				}
			}
			out.WriteString(mask)
			out.WriteString(trailing.String())
		}
	}
	return out.String()
}

func isSecretKey(key string) bool {
	var normal strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'A' && c <= 'Z':
			normal.WriteByte(c + ('a' - 'A'))
		case (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'):
			normal.WriteByte(c)
		}
	}
	n := normal.String()
	if n == "" {
		return false
	}
	for _, f := range secretKeyFragments {
		if strings.Contains(n, f) {
			return true
		}
	}
	return false
}

func isASCIIAlnum(b byte) bool {
	return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}

func isASCIIWhitespace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\f' || b == '\r'
}

// maskKeyedValues masks the value after a secret-bearing key in key=value, key: value and
// "key": "value".
func maskKeyedValues(text string) string {
	var out strings.Builder
	copied := 0
	for i := 0; i < len(text); {
		sep := text[i]
		if sep != '=' && sep != ':' {
			i++
			continue
		}
		keyEnd := i
		if keyEnd > 0 && (text[keyEnd-1] == '"' || text[keyEnd-1] == '\'') {
			keyEnd--
		}
		keyStart := keyEnd
		for keyStart > 0 && (isASCIIAlnum(text[keyStart-1]) || text[keyStart-1] == '_' || text[keyStart-1] == '-') {
			keyStart--
		}
		if keyStart == keyEnd || !isSecretKey(text[keyStart:keyEnd]) {
			i++
			continue
		}
		v := i + 1
		for v < len(text) && text[v] == ' ' {
			v++
		}
		var quote byte
		if v < len(text) && (text[v] == '"' || text[v] == '\'') {
			quote = text[v]
			v++
		}
		end := v
		for end < len(text) {
			b := text[end]
			var stop bool
			switch {
			case quote != 0:
				stop = b == quote
			case sep == ':':
				stop = b == '\n' || b == '\r' || b == ',' || b == '}'
			default:
				stop = isASCIIWhitespace(b) || b == '&' || b == ',' || b == ';'
			}
			if stop {
				break
			}
			end++
		}
		if end > v {
			out.WriteString(text[copied:v])
			out.WriteString(mask)
			copied = end
		}
		i = max(end, i+1)
	}
	out.WriteString(text[copied:])
	return out.String()
}
