package boot

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/config"
)

// Service is what a command starts from: its JSON logger on stderr, the
// --config flag's value, and the loaded configuration.
type Service struct {
	Log        *slog.Logger
	ConfigPath string
	Config     *config.Config
}

// Start parses the command's flags (--config), builds the logger, returns a
// context that SIGINT or SIGTERM ends (call stop when done), and loads the
// configuration. A configuration that does not load is logged with its
// reason and returned as the error; the command then exits 2.
func Start() (ctx context.Context, stop context.CancelFunc, s *Service, err error) {
	configPath := flag.String("config", "", "YAML configuration file (default: $SLUICE_CONFIG)")
	flag.Parse()
	s = &Service{Log: slog.New(slog.NewJSONHandler(os.Stderr, nil)), ConfigPath: *configPath}
	ctx, stop = signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	if s.Config, err = config.Load(*configPath); err != nil {
		s.Log.Error("configuration", "err", err)
	}
	return ctx, stop, s, err
}
