// node-postgres (the npm package `pg`) against `privplan serve` (tests/server/test_node_pg.js
// runs it with NODE_PATH pointing at the installed package): SCRAM over TLS, a table list from
// information_schema and from pg_catalog, SET, a DP GROUP BY (simple query), a parameterised
// one (extended protocol), the cost NOTICE, and the over-budget error (code 53000). Each
// result is one line on standard output, which the test asserts on.
// Usage: node node_pg.js HOST PORT USER PASSWORD [CA_CERT]
'use strict';
const fs = require('fs');
const { Client } = require('pg');

async function main() {
  const [host, port, user, password, ca] = process.argv.slice(2);
  const client = new Client({
    host, port: Number(port), user, password, database: 'demo',
    // with a fifth argument (the server's CA certificate, PEM) the certificate is verified
    ssl: ca ? { ca: fs.readFileSync(ca, 'utf8') } : { rejectUnauthorized: false },
    connectionTimeoutMillis: 10000,
  });
  client.on('notice', (msg) => console.log(`notice ${msg.severity} ${msg.message}`));
  await client.connect();
  console.log(`connected ${client.connection.stream.encrypted ? 'tls' : 'cleartext'}`);
  const listed = await client.query(
    "SELECT table_name FROM information_schema.tables ORDER BY table_name");
  for (const row of listed.rows) console.log(`table ${row.table_name}`);
  const relations = await client.query(
    "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n " +
    "ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'main' ORDER BY 1");
  for (const row of relations.rows) console.log(`relation ${row.relname}`);
  await client.query('SET privplan.epsilon = 0.5');
  console.log('set');
  const simple = await client.query(
    'SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital');
  for (const row of simple.rows) console.log(`simple ${row.hospital} ${row.n}`);
  const param = await client.query(
    'SELECT hospital, COUNT(*) AS n FROM visits WHERE age >= $1 GROUP BY hospital ' +
    'ORDER BY hospital', [18]);
  for (const row of param.rows) console.log(`param ${row.hospital} ${row.n}`);
  await client.query('SET privplan.epsilon = 100');
  try {
    await client.query('SELECT COUNT(*) AS n FROM visits WHERE age >= $1', [18]);
    console.log('over budget answered');
  } catch (err) {
    console.log(`refused ${err.code} ${err.message}`);
  }
  const after = await client.query('SELECT 1 AS one');
  console.log(`after ${after.rows[0].one}`);
  await client.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
