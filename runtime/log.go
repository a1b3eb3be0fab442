package runtime

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

var (
	logOnce sync.Once
	logger  *zap.Logger
)

// Log returns the library logger, built on first use from XCCL_DEBUG and
// XCCL_DEBUG_FILE. Levels: WARN (default), INFO, DEBUG, TRACE (= DEBUG with
// per-operation lines). It writes unbuffered to stderr and starts no goroutine.
func Log() *zap.Logger {
	logOnce.Do(func() {
		c := Load()
		logger = newLogger(c)
		for _, w := range c.Ignored {
			logger.Warn(w)
		}
	})
	return logger
}

// Trace reports whether XCCL_DEBUG=TRACE asked for per-operation lines.
func Trace() bool { return Load().Debug == "TRACE" }

func newLogger(c Config) *zap.Logger {
	lvl := zapcore.WarnLevel
	switch c.Debug {
	case "INFO":
		lvl = zapcore.InfoLevel
	case "DEBUG", "TRACE":
		lvl = zapcore.DebugLevel
	case "ERROR":
		lvl = zapcore.ErrorLevel
	case "NONE", "OFF":
		lvl = zapcore.FatalLevel
	}
	var out zapcore.WriteSyncer = os.Stderr
	if c.DebugFile != "" {
		host, _ := os.Hostname()
		name := strings.NewReplacer("%h", host, "%p", strconv.Itoa(os.Getpid())).Replace(c.DebugFile)
		if f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			out = f
		}
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.EncodeLevel = zapcore.CapitalLevelEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(ec), zapcore.Lock(syncer{out}), lvl)
	return zap.New(core).Named("xccl").With(zap.Int("pid", os.Getpid()))
}

// syncer drops the EINVAL/ENOTTY that fsync on a pipe or tty returns.
type syncer struct{ zapcore.WriteSyncer }

func (s syncer) Sync() error {
	if err := s.WriteSyncer.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTTY) {
		return err
	}
	return nil
}

// SyncLog flushes the logger (finalize, destroy).
func SyncLog() {
	if logger != nil {
		_ = logger.Sync()
	}
}
