<?php
// What the PHP chat does over HTTP, with curl: post each line of a tour to POST /v1/lines, one
// request a line, then read the turn; also the answers the chat must handle (a retry, a stale
// If-Match, an unknown conversation). tests/clients/test_php_client.py runs it against a live
// `chatrecord serve`.
//
// php chat_client.php BASE_URL TOUR.jsonl [CONVERSATION]
//   BASE_URL      the service, e.g. http://127.0.0.1:8765
//   TOUR.jsonl    lines of the input format, one JSON object a line
//   CONVERSATION  the conversation id to post them under (default: the lines' own)
// The bearer token is read from CHATRECORD_API_TOKEN. Prints one line per answer; exits 1 on an
// answer the chat does not expect.

declare(strict_types=1);

[$base, $tour] = [$argv[1] ?? null, $argv[2] ?? null];
if ($base === null || $tour === null) {
    fwrite(STDERR, "usage: php chat_client.php BASE_URL TOUR.jsonl [CONVERSATION]\n");
    exit(2);
}
$token = getenv('CHATRECORD_API_TOKEN');
if ($token === false || $token === '') {
    fwrite(STDERR, "error: CHATRECORD_API_TOKEN is not set\n");
    exit(2);
}

/** One request: returns [status, response headers (lower-case names), decoded JSON body]. */
function call(string $method, string $url, ?object $line = null, array $headers = []): array
{
    global $token;
    $received = [];
    $headers[] = "Authorization: Bearer $token";
    $curl = curl_init($url);
    curl_setopt_array($curl, [
        CURLOPT_CUSTOMREQUEST => $method,
        CURLOPT_RETURNTRANSFER => true,
        CURLOPT_TIMEOUT => 60,
        CURLOPT_HEADERFUNCTION => function ($curl, string $header) use (&$received): int {
            $parts = explode(':', $header, 2);
            if (count($parts) === 2) {
                $received[strtolower(trim($parts[0]))] = trim($parts[1]);
            }
            return strlen($header);
        },
    ]);
    if ($line !== null) {
        // a float keeps its ".0" (1.0 is a whole number to the service), Unicode stays as it is
        $body = json_encode($line, JSON_PRESERVE_ZERO_FRACTION | JSON_UNESCAPED_UNICODE | JSON_THROW_ON_ERROR);
        curl_setopt($curl, CURLOPT_POSTFIELDS, $body);
        $headers[] = 'Content-Type: application/json';
    }
    curl_setopt($curl, CURLOPT_HTTPHEADER, $headers);
    $body = curl_exec($curl);
    if ($body === false) {
        fwrite(STDERR, "error: $method $url: " . curl_error($curl) . "\n");
        exit(1);
    }
    $status = curl_getinfo($curl, CURLINFO_RESPONSE_CODE);
    curl_close($curl);
    return [$status, $received, json_decode($body, false, 512, JSON_THROW_ON_ERROR)];
}

/** Ends the script when an answer is not the one the chat expects. */
function expect(int $status, int $wanted, object $body, string $what): void
{
    if ($status !== $wanted) {
        fwrite(STDERR, "error: $what: expected $wanted, got $status: " . json_encode($body) . "\n");
        exit(1);
    }
}

$lines = [];
foreach (file($tour, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $text) {
    // objects, not arrays: an empty JSON object stays {} when it is sent again
    $line = json_decode($text, false, 512, JSON_THROW_ON_ERROR);
    if (isset($argv[3])) {
        $line->conversation = $argv[3];
    }
    $lines[] = $line;
}
$conversation = $lines[0]->conversation;
$reads = "$base/v1/conversations/" . rawurlencode($conversation);

// Each line names the version it follows (the last ETag; "0" before the conversation starts) and
// carries a key of its own, so a retry after a lost answer gets the first answer back.
$etag = '"0"';
foreach ($lines as $n => $line) {
    $number = $n + 1;
    $key = "$conversation/line-$number";
    $sent = ["If-Match: $etag", "Idempotency-Key: $key"];
    [$status, $headers, $recorded] = call('POST', "$base/v1/lines", $line, $sent);
    expect($status, 200, $recorded, "line $number");
    $etag = $headers['etag'];
    printf("line %d %s: %d, version %d, appended %d\n", $number, $line->type, $status, $recorded->version, $recorded->appended);
}

// The last line again, as a retry whose answer was lost: same key, same body, same If-Match.
$last = count($lines);
[$status, $headers, $again] = call('POST', "$base/v1/lines", $lines[$last - 1], $sent);
expect($status, 200, $again, 'retry');
printf("retry of line %d: %d, version %d, Idempotent-Replayed: %s\n", $last, $status, $again->version,
    $headers['idempotent-replayed'] ?? 'absent');

[$status, $headers, $turn] = call('GET', "$reads/turn");
expect($status, 200, $turn, 'turn');
printf("turn: %d, version %d, ETag %s, rules %s, %d notes\n", $status, $turn->version, $headers['etag'] ?? 'absent',
    $turn->rules, count($turn->notes));
foreach ($turn->notes as $note) {
    // `at` counts Unicode code points (mb_substr), `at_byte` UTF-8 bytes (substr, strlen)
    printf("  note into %s %d%s: %s\n", $note->into, $note->index,
        isset($note->at) ? " at $note->at (byte $note->at_byte)" : '', $note->text);
}

// An edit sent for the version before the last: someone else wrote in between.
$edit = (object) ['type' => 'message_edited', 'conversation' => $conversation, 'at' => '2026-10-31T14:06:00Z',
    'message' => 3, 'text' => 'und jetzt?'];
$stale = '"' . ($turn->version - 1) . '"';
[$status, $headers, $problem] = call('POST', "$base/v1/lines", $edit, ["If-Match: $stale"]);
expect($status, 412, $problem, 'stale If-Match');
printf("stale If-Match %s: %d %s, actual %d\n", $stale, $status, $problem->type, $problem->actual);

// A retry queue that delivers out of order: the last user message of the tour, in a conversation of
// its own, comes before the messages it follows. A 409 with Retry-After is sent again later (after
// what `waits_for` names); a 409 without it is final.
$early = "$conversation-early";
$start = clone $lines[0];
$start->conversation = $early;
$message = clone $lines[$last - 1];
$message->conversation = $early;
$message->message = 2;
call('POST', "$base/v1/lines", $start);
[$status, $headers, $problem] = call('POST', "$base/v1/lines", $message);
expect($status, 409, $problem, 'too early');
printf("too early: %d %s, waits for %s, Retry-After %s\n", $status, $problem->type, $problem->waits_for,
    $headers['retry-after'] ?? 'absent');
$first = clone $lines[1];
$first->conversation = $early;
call('POST', "$base/v1/lines", $first);
sleep((int) ($headers['retry-after'] ?? 1));
[$status, $headers, $recorded] = call('POST', "$base/v1/lines", $message);
expect($status, 200, $recorded, 'sent again');
printf("sent again: %d, version %d\n", $status, $recorded->version);

[$status, $headers, $problem] = call('GET', "$base/v1/conversations/" . rawurlencode("$conversation-never") . '/turn');
expect($status, 404, $problem, 'unknown conversation');
printf("unknown conversation: %d %s\n", $status, $problem->type);
