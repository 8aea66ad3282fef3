// The OpenTelemetry Collector as memprof's tests run it: the real Collector (otelcol), its real OTLP
// receiver, and one exporter of this program's own, "capture", which writes each export of profiles that
// reached it into the directory `directory` names, as the OTLP request pdata marshals it
// (`export.<n>.pb`, n from 1) beside the request's `x-scope-orgid` header (`export.<n>.tenant`, with the
// receiver's include_metadata), so a test reads what the Collector received. Before each export it reads
// `answer` in that directory, so a test can make the Collector refuse: `unavailable <seconds>` (the
// receiver answers 503 with that Retry-After) or `invalid` (400); anything else, or no file, takes it.
//
// Usage: collector --config <file.yaml> (the otelcol command; the profiles pipeline needs
// --feature-gates=service.profilesSupport).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/xexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

type captureConfig struct {
	Directory string `mapstructure:"directory"`
}

type capture struct {
	directory string
	mu        sync.Mutex
	exports   int
}

func (c *capture) Start(context.Context, component.Host) error { return nil }
func (c *capture) Shutdown(context.Context) error              { return nil }
func (c *capture) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (c *capture) ConsumeProfiles(ctx context.Context, profiles pprofile.Profiles) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	answer, _ := os.ReadFile(filepath.Join(c.directory, "answer"))
	fields := strings.Fields(string(answer))
	if len(fields) > 0 && fields[0] == "invalid" {
		return status.Error(codes.InvalidArgument, "capture: told to refuse this export")
	}
	if len(fields) > 1 && fields[0] == "unavailable" {
		seconds, _ := strconv.Atoi(fields[1])
		refused, _ := status.New(codes.Unavailable, "capture: told to be unavailable").
			WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(seconds) * time.Second)})
		return refused.Err()
	}
	body, err := pprofileotlp.NewExportRequestFromProfiles(profiles).MarshalProto()
	if err != nil {
		return err
	}
	c.exports++
	name := filepath.Join(c.directory, fmt.Sprintf("export.%d", c.exports))
	tenant := strings.Join(client.FromContext(ctx).Metadata.Get("x-scope-orgid"), ",")
	if err := os.WriteFile(name+".tenant", []byte(tenant), 0o600); err != nil {
		return err
	}
	// Written whole under another name, then renamed: a reader never sees half an export.
	if err := os.WriteFile(name+".partial", body, 0o600); err != nil {
		return err
	}
	return os.Rename(name+".partial", name+".pb")
}

func captureFactory() exporter.Factory {
	return xexporter.NewFactory(
		component.MustNewType("capture"),
		func() component.Config { return &captureConfig{} },
		xexporter.WithProfiles(func(_ context.Context, _ exporter.Settings, config component.Config) (xexporter.Profiles, error) {
			return &capture{directory: config.(*captureConfig).Directory}, nil
		}, component.StabilityLevelDevelopment),
	)
}

func factories() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap[exporter.Factory](captureFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{Receivers: receivers, Exporters: exporters, Telemetry: otelconftelemetry.NewFactory()}, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "collector", Description: "memprof's test Collector", Version: "0.165.0"},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
