package queuebox

// Logger receives the library's log lines: a message and a map of fields. Every string field has
// been through Sanitize. Without a Logger (Options.Logger nil) the library prints nothing.
type Logger interface {
	Info(message string, fields map[string]any)
	Warn(message string, fields map[string]any)
	Error(message string, fields map[string]any)
}

type level int

const (
	levelInfo level = iota
	levelWarn
	levelError
)

func (w *InboxWorker) log(l level, message string, fields map[string]any) {
	if w.logger == nil {
		return
	}
	clean := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		switch value := v.(type) {
		case string:
			clean[k] = Sanitize(value)
		case error:
			clean[k] = SanitizeError(value)
		default:
			clean[k] = v
		}
	}
	clean["source"] = w.options.Source
	message = Sanitize(message)
	switch l {
	case levelInfo:
		w.logger.Info(message, clean)
	case levelWarn:
		w.logger.Warn(message, clean)
	default:
		w.logger.Error(message, clean)
	}
}
