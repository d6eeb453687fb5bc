# Agent Skills (skills/<name>/SKILL.md) and /skills
# { $name } and { $description } arrive escaped.
skills-title = 🧩 <b>Skills</b>
skills-item = • <code>{ $name }</code> — { $description }
skills-none = 🧩 No skills yet. Put a folder with a <code>SKILL.md</code> into <code>skills/</code> in my working folder, then restart me.
menu-skills = Procedures I can load
