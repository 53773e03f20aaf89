// The PostgreSQL JDBC driver against `privplan serve` (tests/server/test_jdbc.py compiles and
// runs it): SCRAM over TLS, DatabaseMetaData.getTables, getColumns, getPrimaryKeys,
// getImportedKeys and getIndexInfo (pg_catalog queries: the replica has no key), SET, a DP GROUP BY
// through a PreparedStatement (extended protocol, one parameter), the cost NOTICE as a
// SQLWarning, and the over-budget SQLException (SQLState 53000). Each result is one line on
// standard output, which the test asserts on.
// Usage: java -cp postgresql.jar:. Jdbc HOST PORT USER PASSWORD [CA_CERT]

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.util.Properties;

public final class Jdbc {
    private Jdbc() {}

    private static void warnings(SQLWarning warning) {
        for (SQLWarning w = warning; w != null; w = w.getNextWarning()) {
            System.out.println("notice " + w.getSQLState() + " " + w.getMessage());
        }
    }

    public static void main(String[] args) throws Exception {
        // with a fifth argument (the server's CA certificate, PEM) the certificate and the host
        // name are verified; without, TLS is required but not verified
        String url = "jdbc:postgresql://" + args[0] + ":" + args[1] + "/demo?ssl=true&"
            + (args.length > 4 ? "sslmode=verify-full&sslrootcert=" + args[4]
               : "sslmode=require&sslfactory=org.postgresql.ssl.NonValidatingFactory");
        Properties props = new Properties();
        props.setProperty("user", args[2]);
        props.setProperty("password", args[3]);
        props.setProperty("connectTimeout", "10");
        try (Connection con = DriverManager.getConnection(url, props)) {
            System.out.println("connected " + con.getMetaData().getDatabaseProductVersion());
            DatabaseMetaData meta = con.getMetaData();
            try (ResultSet tables = meta.getTables(null, null, "%", new String[] {"TABLE"})) {
                while (tables.next()) {
                    System.out.println("table " + tables.getString("TABLE_SCHEM") + "."
                        + tables.getString("TABLE_NAME"));
                }
            }
            try (ResultSet columns = meta.getColumns(null, null, "visits", "%")) {
                while (columns.next()) {
                    System.out.println("column " + columns.getString("COLUMN_NAME") + " "
                        + columns.getString("TYPE_NAME"));
                }
            }
            int keys = 0;
            try (ResultSet primary = meta.getPrimaryKeys(null, null, "visits");
                 ResultSet imported = meta.getImportedKeys(null, null, "visits");
                 ResultSet indexes = meta.getIndexInfo(null, null, "visits", false, true)) {
                while (primary.next() || imported.next() || indexes.next()) {
                    keys++;
                }
            }
            System.out.println("keys " + keys);
            try (Statement st = con.createStatement()) {
                st.execute("SET privplan.epsilon = 0.5");
                System.out.println("set");
            }
            String sql = "SELECT hospital, COUNT(*) AS n FROM visits WHERE age >= ? "
                + "GROUP BY hospital ORDER BY hospital";
            try (PreparedStatement ps = con.prepareStatement(sql)) {
                ps.setInt(1, 18);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        System.out.println("row " + rs.getString("hospital") + " "
                            + rs.getLong("n"));
                    }
                }
                warnings(ps.getWarnings());
            }
            try (Statement st = con.createStatement()) {
                st.execute("SET privplan.epsilon = 100");
            }
            try (PreparedStatement ps = con.prepareStatement(
                    "SELECT COUNT(*) FROM visits WHERE age >= ?")) {
                ps.setInt(1, 18);
                ps.executeQuery();
                System.out.println("over budget answered");
            } catch (SQLException err) {
                System.out.println("refused " + err.getSQLState() + " " + err.getMessage());
            }
            try (Statement st = con.createStatement();
                 ResultSet rs = st.executeQuery("SELECT 1 AS one")) {
                rs.next();
                System.out.println("after " + rs.getInt(1));
            }
        }
    }
}
