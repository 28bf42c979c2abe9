#include "explore/results.h"

#include "hfuse/error.h"
#include "hfuse/model_io.h"

#include <cstdio>
#include <fstream>

namespace hfuse::explore {
namespace {

std::string csv_field(const std::string &s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string number(double v, const char *fmt) {
    if (std::isnan(v)) return "";
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return buf;
}

}  // namespace

void write_file_atomically(const std::string &path, const std::string &text) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        if (!out) throw Error("cannot write file").in_file(tmp);
        out << text;
        if (!out.flush()) throw Error("cannot write file").in_file(tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error("cannot replace file").in_file(path);
}

void write_results(const std::string &dir, const nlohmann::json &header, const std::vector<Evaluation> &rows) {
    nlohmann::json j = header;
    j["candidates"] = nlohmann::json::array();
    for (const Evaluation &e : rows) j["candidates"].push_back(to_json(e));
    write_file_atomically(dir + "/results.json", j.dump(1) + "\n");
    write_file_atomically(dir + "/results.csv", results_csv(rows));
}

std::vector<Evaluation> read_results(const std::string &path, nlohmann::json *header) {
    nlohmann::json j = read_json_file(path, "results file");
    std::vector<Evaluation> rows;
    try {
        if (!j.is_object() || !j.contains("candidates") || !j["candidates"].is_array()) {
            throw Error("expected an object with a list of \"candidates\"").at_field("candidates");
        }
        for (const nlohmann::json &c : j["candidates"]) rows.push_back(evaluation_from_json(c));
    } catch (Error &e) {
        throw e.in_file(path);
    } catch (const nlohmann::json::exception &e) {
        throw Error(std::string("malformed results: ") + e.what()).in_file(path);
    }
    if (header) {
        *header = j;
        header->erase("candidates");
    }
    return rows;
}

std::string results_csv(const std::vector<Evaluation> &rows) {
    std::string s =
        "id,key,plan,schedule,whole,params,variant,baselines,origin,groups,estimate_ms,bytes_between_groups,"
        "compile_s,median_ms,min_ms,confirm_ms,status,error\n";
    for (const Evaluation &e : rows) {
        const Candidate &c = e.candidate;
        std::string baselines, confirm;
        for (const std::string &b : c.baselines) baselines += (baselines.empty() ? "" : " ") + b;
        for (double v : e.confirm_ms) confirm += (confirm.empty() ? "" : " ") + number(v, "%.6g");
        s += std::to_string(e.id) + "," + c.key + "," + csv_field(plan_summary(c.plan)) + "," + c.schedule + "," +
             (c.whole ? "true" : "false") + "," + csv_field(params_of(c).dump()) + "," + csv_field(c.variant) + "," +
             csv_field(baselines) + "," + c.origin + "," + std::to_string(c.groups) + "," +
             number(c.estimate_ms, "%.4f") + "," + std::to_string(c.bytes_between_groups) + "," +
             number(e.compile_s, "%.3f") + "," + number(e.median_ms, "%.6g") + "," + number(e.min_ms, "%.6g") + "," +
             csv_field(confirm) + "," + e.status + "," + csv_field(e.error) + "\n";
    }
    return s;
}

}  // namespace hfuse::explore
