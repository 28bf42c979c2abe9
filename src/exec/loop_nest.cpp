#include "hfuse/loop_nest.h"

#include "hfuse/error.h"
#include "hfuse/fusion_cost.h"

#include <map>
#include <sstream>

namespace hfuse {
namespace {

using namespace Halide::Internal;
using Halide::Expr;

// Buffer names as the lowered statement has them, without the ".buffer"/".host" suffixes.
std::string buffer_name(std::string name) {
    for (const char *suffix : {".buffer", ".host"}) {
        const std::string s = suffix;
        if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
            name.resize(name.size() - s.size());
    }
    return name;
}

// The names of the variables in an expression: a parallel loop's task function is referred to by one
// ("::NAME", its address).
class VariableNames : public IRVisitor {
public:
    std::vector<std::string> names;

protected:
    using IRVisitor::visit;
    void visit(const Variable *op) override { names.push_back(op->name); }
};

// How a vector statement reads memory: through a gather (a vector load whose lanes' addresses are no
// ramp), or masked (a predicated load, a guarded tail's).
class VectorLoads : public IRVisitor {
public:
    bool gathered = false, masked = false;

protected:
    using IRVisitor::visit;
    void visit(const Load *op) override {
        if (op->type.lanes() > 1) {
            if (!op->index.as<Ramp>() && !op->index.as<Broadcast>()) gathered = true;
            if (!is_const_one(op->predicate)) masked = true;
        }
        IRVisitor::visit(op);
    }
};

class Printer : public IRVisitor {
public:
    // `functions`: the module's lowered functions, where Halide put the bodies of parallel loops
    // (halide_do_par_for calls one per task).
    explicit Printer(const std::map<std::string, const LoweredFunc *> &functions) : functions_(functions) {}
    std::string text() const { return out_.str(); }

protected:
    using IRVisitor::visit;

    void visit(const LetStmt *op) override {
        // Known lets are folded into the extents printed below them.
        const Expr value = simplify(substitute(lets_, op->value));
        const bool known = is_const(value);
        if (known) lets_[op->name] = value;
        parallel_tasks(op->value);
        op->body.accept(this);
        if (known) lets_.erase(op->name);
    }

    void visit(const Evaluate *op) override { parallel_tasks(op->value); }

    void visit(const For *op) override {
        std::string kind;
        switch (op->for_type) {
        case ForType::Parallel: kind = "parallel "; break;
        case ForType::Vectorized: kind = "vectorized "; break;
        case ForType::Unrolled: kind = "unrolled "; break;
        default: break;
        }
        line(kind + "for " + op->name + " (extent " + expr_text(op->extent) + "):");
        depth_++;
        op->body.accept(this);
        depth_--;
    }

    void visit(const Allocate *op) override {
        std::string dims;
        double elements = 1;
        bool known = true;
        for (const Expr &e : op->extents) {
            const Expr v = simplify(substitute(lets_, e));
            dims += " x " + expr_text(v);
            if (const int64_t *c = as_const_int(v)) {
                elements *= static_cast<double>(*c);
            } else {
                known = false;
            }
        }
        std::ostringstream type;
        type << op->type;
        line("allocate " + op->name + ": " + type.str() + dims +
             (known ? " (" + human_bytes(static_cast<int64_t>(elements * op->type.bytes())) + ")" : "") +
             (op->memory_type == Halide::MemoryType::Stack ? ", on the stack" : ""));
        op->body.accept(this);
    }

    void visit(const ProducerConsumer *op) override {
        if (!op->is_producer) {  // what consumes it follows at the same depth
            op->body.accept(this);
            return;
        }
        line("produce " + op->name + ":");
        depth_++;
        op->body.accept(this);
        depth_--;
    }

    // A vector store says what costs more than a dense access: a masked store (a guarded tail's; on
    // AVX2 a vmaskmovps, microcoded on Zen 3), masked loads, loads through a gather.
    void visit(const Store *op) override {
        const int lanes = op->value.type().lanes();
        std::string how;
        if (lanes > 1) {
            VectorLoads loads;
            op->value.accept(&loads);
            how = " (vectors of " + std::to_string(lanes);
            if (!is_const_one(op->predicate)) how += ", masked";
            if (loads.masked) how += ", masked loads";
            if (loads.gathered) how += ", gathered loads";
            how += ")";
        }
        line("store " + buffer_name(op->name) + how);
    }

    void visit(const IfThenElse *op) override {
        // Boundary cases (guarded tails, bounds queries): their statements, at the same depth.
        op->then_case.accept(this);
        if (op->else_case.defined()) op->else_case.accept(this);
    }

    // Not loops, stores or allocations: nothing to print inside.
    void visit(const AssertStmt *) override {}
    void visit(const Free *) override {}
    void visit(const Prefetch *op) override { op->body.accept(this); }

private:
    // A parallel loop, lowered to a call of halide_do_par_for(task, min, extent, closure): printed as a
    // loop over the task's variable, the task's body inside.
    void parallel_tasks(const Expr &e) {
        const Call *call = e.as<Call>();
        if (!call || call->name != "halide_do_par_for" || call->args.size() < 3) return;
        VariableNames v;
        call->args[0].accept(&v);
        for (std::string name : v.names) {
            if (name.rfind("::", 0) == 0) name = name.substr(2);
            auto it = functions_.find(name);
            if (it == functions_.end()) continue;
            const LoweredFunc &task = *it->second;
            const std::string var = task.args.size() > 1 ? task.args[1].name : name;
            line("parallel for " + var + " (extent " + expr_text(call->args[2]) + "):");
            depth_++;
            task.body.accept(this);
            depth_--;
            return;
        }
    }

    std::string expr_text(const Expr &e) const {
        std::ostringstream os;
        os << simplify(substitute(lets_, e));
        return os.str();
    }

    // One line at the current depth; a repeat of the line just printed there (an unrolled loop's
    // copies, a store in each branch of a tail) is left out.
    void line(const std::string &text) {
        const std::string full = std::string(2 * depth_, ' ') + text + "\n";
        if (full == last_) return;
        last_ = full;
        out_ << full;
    }

    const std::map<std::string, const LoweredFunc *> &functions_;
    std::map<std::string, Expr> lets_;
    int depth_ = 0;
    std::string last_;
    std::ostringstream out_;
};

}  // namespace

std::string loop_nest(const Stmt &body) {
    const std::map<std::string, const LoweredFunc *> none;
    Printer p(none);
    body.accept(&p);
    return p.text();
}

std::string loop_nest(Halide::Pipeline pipeline, const std::vector<Halide::Argument> &arguments,
                      const Halide::Target &target) {
    try {
        const Halide::Module module = pipeline.compile_to_module(arguments, "hfuse_explained", target);
        std::map<std::string, const LoweredFunc *> functions;
        for (const LoweredFunc &f : module.functions()) functions[f.name] = &f;
        if (auto it = functions.find("hfuse_explained"); it != functions.end()) {
            Printer p(functions);
            it->second->body.accept(&p);
            return p.text();
        }
    } catch (const Halide::Error &e) {
        throw Error(std::string("Halide failed to lower the pipeline: ") + e.what());
    }
    throw Error("internal: the lowered module has no function hfuse_explained");
}

}  // namespace hfuse
