//! LEAD'S STUB, replaced by the helper's schedule at merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pair {
    pub client: usize,
    pub server: usize,
}
#[derive(Debug, Clone)]
pub enum Shape {
    Full { both_directions: bool },
    Pairs(Vec<Pair>),
    Star { server: usize },
}
#[derive(Debug, Clone)]
pub struct Plan {
    pub shape: Shape,
    pub concurrency: Option<usize>,
}
pub fn rounds(n: usize, plan: &Plan) -> Result<Vec<Vec<Pair>>, String> {
    let mut out = Vec::new();
    match &plan.shape {
        Shape::Full { .. } => {
            let m = if n.is_multiple_of(2) { n } else { n + 1 };
            let mut ring: Vec<usize> = (0..m).collect();
            for r in 0..m - 1 {
                let mut round = Vec::new();
                for i in 0..m / 2 {
                    let (a, b) = (ring[i], ring[m - 1 - i]);
                    if a < n && b < n {
                        let (c, s) = if (r + i) % 2 == 0 { (a, b) } else { (b, a) };
                        round.push(Pair { client: c, server: s });
                    }
                }
                out.push(round);
                let last = ring.pop().unwrap();
                ring.insert(1, last);
            }
        }
        Shape::Pairs(p) => out = p.iter().map(|p| vec![*p]).collect(),
        Shape::Star { server } => out.push(
            (0..n)
                .filter(|i| i != server)
                .map(|c| Pair {
                    client: c,
                    server: *server,
                })
                .collect(),
        ),
    }
    Ok(out)
}
