// Command kedalag asks KEDA's own Kafka scaler how much lag a consumer group has.
//
// It is the oracle of `make autoscale`: given a ScaledObject trigger's metadata (as
// key=value flags), it prints one JSON line per poll with the External metric value
// and `active`, exactly as KEDA would report them to the HPA. It imports
// github.com/kedacore/keda/v2/pkg/scalers, so the numbers are KEDA's, not ours.
//
// Usage: kedalag -type kafka -meta bootstrapServers=127.0.0.1:9092 -meta topic=t \
//            -meta consumerGroup=g -meta lagThreshold=100 [-interval-ms 1000] [-once]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kedacore/keda/v2/pkg/scalers"
	"github.com/kedacore/keda/v2/pkg/scalers/scalersconfig"
)

type metaFlags map[string]string

func (m metaFlags) String() string { return fmt.Sprint(map[string]string(m)) }

func (m metaFlags) Set(v string) error {
	key, value, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("-meta wants key=value, got %q", v)
	}
	m[key] = value
	return nil
}

type poll struct {
	TimeS      float64 `json:"time_s"`
	MetricName string  `json:"metric"`
	Value      float64 `json:"value"`
	Target     float64 `json:"target"`
	Active     bool    `json:"active"`
	Error      string  `json:"error,omitempty"`
}

func main() {
	// A FlagSet of our own: a KEDA package registers ginkgo's flags on the default one.
	fs := flag.NewFlagSet("kedalag", flag.ExitOnError)
	meta := metaFlags{}
	fs.Var(meta, "meta", "trigger metadata key=value (repeatable)")
	triggerType := fs.String("type", "kafka", "trigger type: kafka (sarama) or apache-kafka (kafka-go)")
	intervalMs := fs.Int("interval-ms", 1000, "polling interval")
	once := fs.Bool("once", false, "poll once and exit")
	_ = fs.Parse(os.Args[1:])

	ctx := context.Background()
	config := &scalersconfig.ScalerConfig{
		ScalableObjectName:      "derender-worker",
		ScalableObjectNamespace: "default",
		ScalableObjectType:      "ScaledObject",
		TriggerType:             *triggerType,
		TriggerMetadata:         meta,
		ResolvedEnv:             map[string]string{},
		AuthParams:              map[string]string{},
		GlobalHTTPTimeout:       10 * time.Second,
	}
	var scaler scalers.Scaler
	var err error
	switch *triggerType {
	case "kafka":
		scaler, err = scalers.NewKafkaScaler(ctx, config)
	case "apache-kafka":
		scaler, err = scalers.NewApacheKafkaScaler(ctx, config)
	default:
		err = fmt.Errorf("unknown trigger type %q", *triggerType)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kedalag:", err)
		os.Exit(2)
	}
	defer scaler.Close(ctx)

	specs := scaler.GetMetricSpecForScaling(ctx)
	if len(specs) != 1 || specs[0].External == nil {
		fmt.Fprintln(os.Stderr, "kedalag: expected one External metric spec")
		os.Exit(2)
	}
	name := specs[0].External.Metric.Name
	target := specs[0].External.Target.AverageValue.AsApproximateFloat64()
	out := json.NewEncoder(os.Stdout)
	start := time.Now()
	for {
		p := poll{TimeS: float64(time.Now().UnixNano()) / 1e9, MetricName: name, Target: target}
		values, active, err := scaler.GetMetricsAndActivity(ctx, name)
		if err != nil {
			p.Error = err.Error()
		} else if len(values) > 0 {
			p.Value = values[0].Value.AsApproximateFloat64()
			p.Active = active
		}
		_ = out.Encode(p)
		if *once {
			return
		}
		next := start.Add(time.Duration(*intervalMs) * time.Millisecond)
		for !next.After(time.Now()) {
			next = next.Add(time.Duration(*intervalMs) * time.Millisecond)
		}
		start = next
		time.Sleep(time.Until(next))
	}
}
