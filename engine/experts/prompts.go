package experts

// Prompts is the built-in prompt set `strata profile` runs to learn which experts a model
// routes to most: everyday chat, code in several languages, maths, summarisation, and ten
// human languages (German, French, Spanish, Italian, Portuguese, Russian, Greek, Arabic,
// Chinese, Japanese), a few thousand tokens in all. MoE routers specialise by topic and
// language, so a varied set ranks first the experts most people need. Each string is one
// user turn; the caller wraps it in the model's chat template.
func Prompts() []string {
	return []string{
		// Everyday chat and advice.
		"Hi! I just moved to a new city for work and I don't know anyone yet. What are some good ways to meet people and make friends as an adult, without it feeling forced?",
		"My laptop has become really slow over the last few months. It takes ages to start and the fan is always loud. What should I check first, and what can I do myself before taking it to a repair shop?",
		"I want to cook a vegetarian dinner for six people this Saturday. Two of the guests do not eat gluten. Suggest a menu with a starter, a main course and a dessert, and give me a shopping list and a rough timetable for the afternoon.",
		"Write a short, friendly email to my landlord asking whether the broken heating in the bedroom can be repaired this week. Mention that it has been cold for five days and that I am at home every morning until ten.",
		"Explain the difference between a Roth IRA and a traditional IRA as if I were twenty-five and had just started my first job. Keep it short and tell me which questions I should ask before choosing.",

		// Code.
		"Write a Go function that reads a CSV file with the columns name, email and age, skips rows whose age is not a number, and returns a slice of structs sorted by age. Include error handling that says which line was bad, and a table-driven test.",
		"Here is a Python function that is too slow on large inputs:\n\n```python\ndef pairs_with_sum(nums, target):\n    result = []\n    for i in range(len(nums)):\n        for j in range(i + 1, len(nums)):\n            if nums[i] + nums[j] == target:\n                result.append((nums[i], nums[j]))\n    return result\n```\n\nExplain its time complexity and rewrite it to run in linear time. Keep duplicates handled the same way.",
		"In Rust, what is the difference between `Box<dyn Trait>`, `&dyn Trait` and generics with trait bounds? Show a small example where each one is the right choice, and explain what happens with lifetimes and dynamic dispatch.",
		"I have a React component that fetches a list of users in `useEffect` and sometimes shows the results of an old request after the user has typed a new search term. Why does this happen, and how do I fix it with an AbortController? Show the corrected TypeScript code.",
		"Write a SQL query for PostgreSQL that, given tables orders(id, customer_id, created_at, total) and customers(id, name, country), returns for each country the three customers with the highest total spending in 2024, with their rank. Explain why you chose a window function.",
		"What does this C code print, and why? Is there undefined behaviour?\n\n```c\n#include <stdio.h>\nint main(void) {\n    int a[4] = {1, 2, 3, 4};\n    int *p = a;\n    printf(\"%d %d\\n\", *p++, *++p);\n    unsigned int x = 0;\n    x--;\n    printf(\"%u\\n\", x);\n    return 0;\n}\n```",
		"Write a bash script that finds every file larger than 100 MB under a given folder, prints them sorted by size in a human-readable form, and asks for confirmation before deleting each one. It must handle file names with spaces.",
		"Review this JavaScript and list the bugs and the style problems, most serious first, then give a corrected version:\n\n```javascript\nasync function loadAll(ids) {\n  let results = [];\n  ids.forEach(async (id) => {\n    const res = await fetch('/api/item/' + id);\n    results.push(await res.json());\n  });\n  return results;\n}\n\nfunction average(xs) {\n  var sum = 0;\n  for (var i = 0; i <= xs.length; i++) sum += xs[i];\n  return sum / xs.length;\n}\n```",
		"In Java, when should I use a record, when an enum and when an ordinary class? Write a small inventory example with a Product record, a Category enum and a Warehouse class that keeps stock levels thread-safe, and explain the choices.",

		// Maths and reasoning.
		"Solve step by step: a train leaves city A at 9:00 travelling at 80 km/h towards city B, which is 300 km away. Another train leaves B at 10:00 travelling towards A at 120 km/h. At what time do they meet, and how far from A?",
		"Prove that the square root of 2 is irrational. Then explain, in plain words, why the same argument does not work for the square root of 4.",
		"Let f(x) = x^3 - 6x^2 + 9x + 1. Find the critical points, decide which are local maxima or minima, and compute the integral of f from 0 to 3. Show your working.",
		"A bag holds 5 red, 4 blue and 3 green marbles. Three marbles are drawn without replacement. What is the probability that all three have different colours? What if they are drawn with replacement?",
		"Explain what eigenvalues and eigenvectors are, using a 2x2 matrix [[2, 1], [1, 2]] as the example. Compute them and describe what the matrix does to the plane geometrically.",
		"A cup of coffee at 90 °C is left in a room at 20 °C and cools to 60 °C in ten minutes. Using Newton's law of cooling, how long until it reaches 40 °C? Set up the differential equation, solve it and check the answer.",

		// Other languages.
		"Kannst du mir erklären, wie die Mülltrennung in Deutschland funktioniert? Ich bin gerade hierher gezogen und verstehe nicht, was in die gelbe Tonne, die Biotonne und den Restmüll gehört. Was mache ich mit Glasflaschen und Pfandflaschen?",
		"Schreibe eine kurze Geschichte über einen alten Leuchtturmwärter, der eines Nachts eine Flaschenpost findet. Die Geschichte soll ruhig und ein wenig melancholisch sein und mit einer überraschenden Wendung enden.",
		"Je prépare un voyage de dix jours en Bretagne au mois de mai avec deux enfants de huit et onze ans. Peux-tu me proposer un itinéraire, des activités adaptées aux enfants et quelques spécialités culinaires à goûter absolument ?",
		"Explique-moi la différence entre le passé composé et l'imparfait, avec des exemples simples. Pourquoi dit-on « il pleuvait quand je suis sorti » et non l'inverse ?",
		"请用简单的语言解释一下什么是机器学习，以及它和传统编程有什么不同。最好举一个生活中的例子，比如垃圾邮件过滤或者推荐系统。",
		"我下个月要去北京出差三天，工作之余想看看名胜古迹。请帮我安排一个行程，包括交通方式、每天的参观地点，以及几家值得一试的餐馆。",
		"¿Cuáles son las principales causas del cambio climático y qué medidas pueden tomar los ciudadanos en su vida diaria para reducir su huella de carbono? Responde de forma clara y con ejemplos concretos.",
		"Escribe una carta formal para solicitar un puesto de trabajo como ingeniero de software en una empresa de Madrid. Menciona cinco años de experiencia con Java y Go, y el interés en trabajar en sistemas distribuidos.",
		"Объясни, пожалуйста, как работает фотосинтез, простыми словами, чтобы понял школьник. Почему листья зелёные и что происходит с растениями осенью?",
		"Помоги составить план подготовки к экзамену по истории России за две недели. Я учусь по вечерам после работы, у меня есть примерно два часа в день.",
		"日本語で質問します。東京で初めて一人暮らしをする大学生に、家賃の相場、部屋探しのコツ、そして生活費を節約する方法を教えてください。",
		"Qual è la differenza tra un mutuo a tasso fisso e uno a tasso variabile? Spiegamelo con un esempio numerico semplice e dimmi quali rischi devo considerare.",
		"Ποια είναι τα πιο σημαντικά αρχαία μνημεία της Αθήνας και πώς μπορώ να τα επισκεφθώ σε μία μέρα; Δώσε μου και μερικές συμβουλές για το φαγητό.",
		"ما هي أفضل الطرق لتعلم لغة جديدة بسرعة؟ أريد نصائح عملية يمكنني تطبيقها كل يوم، مع أمثلة على تطبيقات أو كتب مفيدة.",
		"Quais são as vantagens e desvantagens de trabalhar remotamente? Estou pensando em aceitar uma proposta de emprego totalmente remota e gostaria de uma análise equilibrada.",

		// Summarisation.
		"Summarise the following text in three sentences for a busy manager:\n\nOver the last quarter the support team answered 18,400 tickets, 12% more than in the quarter before. The median first-response time fell from 6 hours to 2.5 hours after the team introduced a rotating on-call schedule and a set of reply templates for the twenty most common questions. Customer satisfaction rose from 81% to 88%. However, tickets about the billing system doubled after the March release, which changed how invoices are split between departments, and those tickets take three times longer to resolve than average. The team asks for a dedicated billing specialist and for the product group to review the invoice changes before the next release. Staff turnover stayed low: one person left and two joined.",
		"Give a short summary and then a list of the key points of this passage:\n\nThe printing press, developed by Johannes Gutenberg around 1440, combined movable metal type, an oil-based ink and a wooden press adapted from those used to make wine. Before it, books in Europe were copied by hand, which made them rare and expensive. Within fifty years, presses were working in more than two hundred cities, and millions of books had been printed. Cheaper books helped spread literacy, allowed scientists to share and check each other's results, and made it far harder for authorities to suppress ideas. Historians still debate how much the press caused the Reformation and the Scientific Revolution and how much it only sped up changes already under way.",
		"Résume ce texte en une phrase, puis en trois mots-clés : « La ville a décidé de transformer l'ancienne gare de marchandises en un quartier mixte, avec des logements, des bureaux, une école et un grand parc. Les travaux dureront six ans. Les riverains saluent la création d'espaces verts mais s'inquiètent de la hausse du trafic et des loyers. »",
		"Fasse den folgenden Text in zwei Sätzen zusammen und nenne die wichtigste Zahl:\n\nDie Stadtwerke haben im vergangenen Jahr 42 Millionen Euro in das Fernwärmenetz investiert. Rund 3.800 Haushalte wurden neu angeschlossen, vor allem in den Neubaugebieten im Norden der Stadt. Gleichzeitig sank der Anteil der Wärme aus Erdgas von 71 auf 58 Prozent, weil ein neues Biomasseheizkraftwerk und zwei große Wärmepumpen in Betrieb gingen. Die Preise für Kunden stiegen dennoch um acht Prozent, was die Stadtwerke mit höheren Netzentgelten und Zinskosten begründen. Verbraucherschützer fordern mehr Transparenz bei der Preisgestaltung.",
		"Summarise this meeting transcript as a list of decisions and a list of open action items with owners:\n\nAnna: Let's start with the release. QA found two blocking bugs in the export feature, both in the PDF renderer.\nBen: I can fix the font one today. The page-break bug needs a redesign of the layout code, at least three days.\nAnna: Then we ship on Thursday without the new PDF layout and keep the old renderer behind a flag.\nChloe: Marketing needs the release notes by Wednesday noon.\nBen: I'll draft them tonight.\nAnna: Good. Second topic: the database migration. Chloe, where are we?\nChloe: The staging run took four hours; production is twice the size, so we need a maintenance window on a weekend.\nAnna: Let's propose the 14th to the customers. Ben, please write the rollback plan first.\nBen: Fine, by Friday.",

		// Writing and explanation.
		"Write a haiku about debugging code at three in the morning, then explain the imagery you chose.",
		"Explain how public-key cryptography lets two people who have never met agree on a secret over the internet. Use an analogy first, then describe what actually happens in a TLS handshake.",
		"Compare the causes of the First World War with those of the Second World War. Focus on alliances, economics and nationalism, and answer in about two hundred words.",
	}
}
