// Command kafkaprobe answers whether a Kafka broker is ready to serve clients.
//
// It makes one Metadata request with kafka-go, the client sluice uses, and exits 0
// when the broker answers and lists itself (a KRaft broker appears in metadata only
// once it is registered and unfenced), 1 otherwise, printing the reason on stderr.
// deploy/local/services.sh calls it in a loop while it waits for a broker to start.
//
//	kafkaprobe -addr 127.0.0.1:9092 -timeout 2s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "broker address host:port")
	timeout := flag.Duration("timeout", 2*time.Second, "deadline of the single attempt")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := probe(ctx, *addr); err != nil {
		fmt.Fprintf(os.Stderr, "kafkaprobe: %s: %v\n", *addr, err)
		os.Exit(1)
	}
}

// probe returns nil when the broker at addr answers a Metadata request that lists
// at least one broker.
func probe(ctx context.Context, addr string) error {
	client := &kafka.Client{Addr: kafka.TCP(addr)}
	resp, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if len(resp.Brokers) == 0 {
		return fmt.Errorf("metadata: no broker registered yet")
	}
	return nil
}
