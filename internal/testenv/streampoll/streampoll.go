// Package streampoll reads a DynamoDB table's stream from moto the way a
// Lambda event source mapping does, and hands each batch over in the shape
// Lambda invokes a function with ({"Records": [...]}, the records exactly
// as DynamoDB Streams' GetRecords returns them). A partial batch response
// is honoured as Lambda honours it: the shard is read again from the first
// failed record. moto serves the Streams API on its one port; the requests
// are made by hand so that the records reach the function byte for byte.
package streampoll

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Poller reads one table's stream.
type Poller struct {
	url, region, arn string
	// next is each shard's iterator; failed ones are re-opened at a
	// sequence number.
	next map[string]string
}

// New finds the table's stream (it must have one) and opens every shard
// from its start.
func New(ctx context.Context, db *dynamodb.Client, url, region, table string) (*Poller, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil, err
	}
	if aws.ToString(out.Table.LatestStreamArn) == "" {
		return nil, fmt.Errorf("table %s has no stream", table)
	}
	return Open(ctx, url, region, aws.ToString(out.Table.LatestStreamArn), "TRIM_HORIZON")
}

// Open opens every shard of a stream at position: TRIM_HORIZON (its
// oldest record) or LATEST (what comes next), as a mapping's starting
// position says.
func Open(ctx context.Context, url, region, streamARN, position string) (*Poller, error) {
	p := &Poller{url: url, region: region, arn: streamARN, next: map[string]string{}}
	var desc struct {
		StreamDescription struct {
			Shards []struct{ ShardId string }
		}
	}
	if err := p.call(ctx, "DescribeStream", map[string]any{"StreamArn": p.arn}, &desc); err != nil {
		return nil, err
	}
	for _, s := range desc.StreamDescription.Shards {
		if err := p.open(ctx, s.ShardId, position, ""); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *Poller) open(ctx context.Context, shard, kind, seq string) error {
	req := map[string]any{"StreamArn": p.arn, "ShardId": shard, "ShardIteratorType": kind}
	if seq != "" {
		req["SequenceNumber"] = seq
	}
	var it struct{ ShardIterator string }
	if err := p.call(ctx, "GetShardIterator", req, &it); err != nil {
		return err
	}
	p.next[shard] = it.ShardIterator
	return nil
}

// Batch is one shard's new records, as Lambda's event.
type Batch struct {
	Shard   string
	Event   json.RawMessage
	Records int
}

// Poll returns the new records of each shard that has some.
func (p *Poller) Poll(ctx context.Context) ([]Batch, error) {
	var out []Batch
	for shard, it := range p.next {
		var page struct {
			Records           []json.RawMessage
			NextShardIterator string
		}
		if err := p.call(ctx, "GetRecords", map[string]any{"ShardIterator": it}, &page); err != nil {
			return nil, err
		}
		p.next[shard] = page.NextShardIterator
		if len(page.Records) == 0 {
			continue
		}
		ev, _ := json.Marshal(map[string]any{"Records": page.Records})
		out = append(out, Batch{Shard: shard, Event: ev, Records: len(page.Records)})
	}
	return out, nil
}

// Retry reads the shard again from the record with this sequence number
// (the first item failure of a partial batch response).
func (p *Poller) Retry(ctx context.Context, shard, seq string) error {
	return p.open(ctx, shard, "AT_SEQUENCE_NUMBER", seq)
}

func (p *Poller) call(ctx context.Context, op string, in, out any) error {
	body, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDBStreams_20120810."+op)
	// moto picks the service from the credential scope; it checks no signature.
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/"+p.region+"/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("streams %s: HTTP %d: %s", op, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}
