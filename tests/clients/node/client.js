// node-postgres (`pg` from npm) against `lkplake serve`, for the tests:
//   node client.js HOST PORT PASSWORD
// prints {"throughput", "rows", "reports", "metrics", "version"} as JSON, or {"error"} and exits 1.
const { Client } = require("pg");

async function main() {
  const [host, port, password] = process.argv.slice(2);
  const client = new Client({
    host,
    port: Number(port),
    user: "lkplake",
    database: "lkplake",
    password,
    connectionTimeoutMillis: 10000,
  });
  await client.connect();
  try {
    const throughput = await client.query(
      "SELECT head_value FROM comparisons WHERE testcase = $1 AND machine = $2 AND metric = $3",
      ["vm-scalability", "lkp-csl-2sp3", "vm-scalability.throughput"],
    );
    const reports = await client.query("SELECT count(*) AS n FROM reports");
    const metrics = await client.query("SELECT count(*) AS n FROM metrics");
    const version = await client.query("SELECT version() AS v");
    console.log(
      JSON.stringify({
        throughput: Number(throughput.rows[0].head_value),
        rows: throughput.rows.length,
        reports: Number(reports.rows[0].n),
        metrics: Number(metrics.rows[0].n),
        version: version.rows[0].v,
      }),
    );
  } finally {
    await client.end();
  }
}

main().catch((e) => {
  console.log(JSON.stringify({ error: String(e) }));
  process.exit(1);
});
